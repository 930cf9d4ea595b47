package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// npmInstallHint is what to run when the conformance runner is missing.
const npmInstallHint = "npm ci --prefix integration --no-audit --no-fund"

// shimBelowMajor: Node.js majors below this one lack fs.globSync, which the
// runner imports by name, so they get the node20/ preload.
const shimBelowMajor = 22

// runner is the conformance runner installed under integration/node_modules.
type runner struct {
	bin         string   // integration/node_modules/.bin/conformance, absolute
	env         []string // the test's environment, NODE_OPTIONS extended when the shim is needed
	nodeVersion string   // `node --version`
	shim        bool     // the node20 preload is in NODE_OPTIONS
}

// findRunner locates the runner and node, and decides on the Node 20 shim.
func findRunner() (*runner, error) {
	bin, err := filepath.Abs(filepath.Join("..", "node_modules", ".bin", "conformance"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the MCP conformance runner is not installed (%s is missing): run `%s` from the module root (.ci/run does it)", bin, npmInstallHint)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not on PATH; the conformance runner needs Node.js 20 or later: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
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
	r := &runner{bin: bin, env: os.Environ(), nodeVersion: version}
	if major < shimBelowMajor {
		shim, err := filepath.Abs(filepath.Join("node20", "register.mjs"))
		if err != nil {
			return nil, err
		}
		if r.env, err = withNodeImport(r.env, shim); err != nil {
			return nil, err
		}
		r.shim = true
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

// command is the runner with args, in a process group of its own that is
// killed whole when ctx ends.
func (r *runner) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// scenarioLine is one line of `conformance list --server`: "  - name [versions]".
var scenarioLine = regexp.MustCompile(`^\s+- ([a-z0-9][a-z0-9-]*) \[`)

// serverScenarios lists every server scenario of the runner (the set that
// `--suite all` runs).
func (r *runner) serverScenarios() ([]string, error) {
	names, err := r.listScenarios("--server", scenarioLine)
	if err == nil && len(names) == 0 {
		err = errors.New("conformance list --server printed no scenarios")
	}
	return names, err
}

// listScenarios runs `conformance list <kind>` and returns the names that
// line matches (its first group).
func (r *runner) listScenarios(kind string, line *regexp.Regexp) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	out, err := r.command(ctx, "list", kind).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("conformance list %s: %w\n%s", kind, err, tail(string(out), 3000))
	}
	var names []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			names = append(names, m[1])
		}
	}
	return names, nil
}

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING or INFO
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// scenarioResult is what the runner recorded for one scenario.
type scenarioResult struct {
	checks []check
}

// count returns how many checks have the status.
func (s *scenarioResult) count(status string) int {
	n := 0
	for _, c := range s.checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

// passed applies the runner's own rule: a scenario fails when any check is
// a FAILURE or a WARNING.
func (s *scenarioResult) passed() bool {
	return s.count("FAILURE") == 0 && s.count("WARNING") == 0
}

// problems describes the failing and warning checks, one per line.
func (s *scenarioResult) problems() string {
	var b strings.Builder
	for _, c := range s.checks {
		if c.Status != "FAILURE" && c.Status != "WARNING" {
			continue
		}
		fmt.Fprintf(&b, "    %s %s: %s\n", c.Status, c.ID, c.ErrorMessage)
		if len(c.Details) > 0 && string(c.Details) != "null" {
			fmt.Fprintf(&b, "      details: %s\n", tail(string(c.Details), 1500))
		}
	}
	return b.String()
}

// suiteRun is one run of the server suite.
type suiteRun struct {
	output    string // the runner's stdout and stderr
	exitCode  int
	total     string // the runner's "Total: N passed, M failed" line
	scenarios map[string]*scenarioResult
}

// totalLine is the runner's closing summary line.
var totalLine = regexp.MustCompile(`Total: (\d+) passed, (\d+) failed`)

// runSuite runs `conformance server --suite all` against url, writing the
// results under outDir, and reads them back. expected, if not "", is the
// expected-failures file. A non-zero exit is not an error here: the caller
// judges the results.
func (r *runner) runSuite(url, outDir, expected string) (*suiteRun, error) {
	args := []string{"server", "--url", url, "--suite", "all", "-o", outDir}
	if expected != "" {
		args = append(args, "--expected-failures", expected)
	}
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	cmd := r.command(ctx, args...)
	out, err := cmd.CombinedOutput()
	run := &suiteRun{output: string(out)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("conformance server --url %s did not finish within %s:\n%s", url, suiteTimeout, tail(run.output, 4000))
	case errors.As(err, &exit):
		run.exitCode = exit.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("conformance server --url %s: %w", url, err)
	}
	m := totalLine.FindStringSubmatch(run.output)
	if m == nil {
		return nil, fmt.Errorf("conformance server --url %s (exit %d) printed no %q line:\n%s", url, run.exitCode, "Total: N passed, M failed", tail(run.output, 4000))
	}
	run.total = m[0]
	if run.scenarios, err = readResults(outDir); err != nil {
		return nil, err
	}
	// The runner's totals count SUCCESS and FAILURE checks: the files read
	// back must agree with them, or they are not this run's results.
	var success, failure int
	for _, s := range run.scenarios {
		success += s.count("SUCCESS")
		failure += s.count("FAILURE")
	}
	if want := fmt.Sprintf("Total: %d passed, %d failed", success, failure); want != run.total {
		return nil, fmt.Errorf("the checks.json files under %s add up to %q but the runner printed %q", outDir, want, run.total)
	}
	return run, nil
}

// resultDir is the runner's per-scenario output directory name:
// "server-<scenario>-<ISO time with : and . as ->".
var resultDir = regexp.MustCompile(`^server-([a-z0-9][a-z0-9-]*)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// readResults reads every server-<scenario>-<time>/checks.json under dir.
func readResults(dir string) (map[string]*scenarioResult, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("conformance results: %w", err)
	}
	results := make(map[string]*scenarioResult)
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			return nil, fmt.Errorf("conformance results: unexpected entry %q in %s", e.Name(), dir)
		}
		if results[m[1]] != nil {
			return nil, fmt.Errorf("conformance results: scenario %s has two result directories in %s", m[1], dir)
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			return nil, fmt.Errorf("conformance results: %w", err)
		}
		var checks []check
		if err := json.Unmarshal(raw, &checks); err != nil {
			return nil, fmt.Errorf("conformance results: %s/checks.json: %w", e.Name(), err)
		}
		results[m[1]] = &scenarioResult{checks: checks}
	}
	return results, nil
}

// missing returns the scenarios that have no result in run.
func (run *suiteRun) missing(scenarios []string) []string {
	var out []string
	for _, s := range scenarios {
		if run.scenarios[s] == nil {
			out = append(out, s)
		}
	}
	return out
}

// failedChecks returns how many FAILURE checks the run has in all.
func (run *suiteRun) failedChecks() int {
	n := 0
	for _, s := range run.scenarios {
		n += s.count("FAILURE")
	}
	return n
}

// passedSet returns the names of the scenarios that passed, sorted.
func (run *suiteRun) passedSet() []string {
	var out []string
	for name, s := range run.scenarios {
		if s.passed() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
