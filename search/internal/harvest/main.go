// Command harvest captures the tools/list output of real MCP servers for the
// search package's real-catalog benchmark (search/testdata/realcatalogs). It
// is run by hand, never in CI:
//
//	go run ./search/internal/harvest [-only id,id] [-out search/testdata/realcatalogs]
//
// For each server of servers.json it installs the package at its pinned
// version into a temporary directory (npm install --prefix, install scripts
// off), starts its bin with node over stdio with the listed dummy arguments
// and environment (no real credentials: a server that cannot list its tools
// without an account is dropped from the list), sends initialize and
// tools/list (following cursors), and writes <id>.json with the package,
// version and licence from the installed package.json and each tool's name,
// title, description and inputSchema as the server published them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// serverTimeout bounds one server's start and listing; npx-free installs of
// a published package start in seconds, and a server that waits for an
// account it cannot reach would otherwise hang the run.
const serverTimeout = 60 * time.Second

// dummyKubeconfig points at a cluster that does not exist, for Kubernetes
// servers that want an active context before they list their tools.
const dummyKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: dummy
  cluster: {server: "https://127.0.0.1:9"}
users:
- name: dummy
  user: {token: dummy}
contexts:
- name: dummy
  context: {cluster: dummy, user: dummy}
current-context: dummy
`

// installTimeout bounds one npm install.
const installTimeout = 5 * time.Minute

// server is one entry of servers.json.
type server struct {
	ID      string            `json:"id"`
	Package string            `json:"package"`
	Version string            `json:"version"`
	Bin     string            `json:"bin,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Catalog is the layout of one <id>.json file.
type Catalog struct {
	Server  string `json:"server"`
	Package string `json:"package"`
	Version string `json:"version"`
	License string `json:"license"`
	Tools   []Tool `json:"tools"`
}

// Tool is one tool as published.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

func main() {
	out := flag.String("out", filepath.Join("search", "testdata", "realcatalogs"), "directory with servers.json; catalogs are written to its tools/ folder")
	only := flag.String("only", "", "comma-separated server ids to harvest (default: all)")
	flag.Parse()
	if err := run(context.Background(), *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "harvest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir, only string) error {
	data, err := os.ReadFile(filepath.Join(dir, "servers.json"))
	if err != nil {
		return err
	}
	var list struct {
		Servers []server `json:"servers"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("servers.json: %w", err)
	}
	want := map[string]bool{}
	for _, id := range strings.Split(only, ",") {
		if id != "" {
			want[id] = true
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		return err
	}
	npmCache, err := os.MkdirTemp("", "harvest-npm-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(npmCache)
	var failed []string
	for _, s := range list.Servers {
		if len(want) > 0 && !want[s.ID] {
			continue
		}
		c, err := harvest(ctx, s, npmCache)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s (%s@%s): %v\n", s.ID, s.Package, s.Version, err)
			failed = append(failed, s.ID)
			continue
		}
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "tools", s.ID+".json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %d tools (%s@%s, %s)\n", s.ID, len(c.Tools), c.Package, c.Version, c.License)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d servers failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

// harvest installs, starts and lists one server.
func harvest(ctx context.Context, s server, npmCache string) (*Catalog, error) {
	tmp, err := os.MkdirTemp("", "harvest-"+s.ID+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	prefix := filepath.Join(tmp, "pkg")
	work := filepath.Join(tmp, "work")
	home := filepath.Join(tmp, "home")
	for _, d := range []string{prefix, work, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// An empty kubeconfig-like file and the like live in work; servers
	// that read a path from their environment get one there.
	if err := os.WriteFile(filepath.Join(work, "kubeconfig"), []byte(dummyKubeconfig), 0o600); err != nil {
		return nil, err
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"PUPPETEER_SKIP_DOWNLOAD=1",
		"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1",
	}
	// npm needs the machine's registry settings (CA file, proxy) and
	// shares one download cache across servers; the servers get neither.
	installEnv := append([]string{"npm_config_cache=" + npmCache}, env...)
	if uc, err := os.UserHomeDir(); err == nil {
		if _, err := os.Stat(filepath.Join(uc, ".npmrc")); err == nil {
			installEnv = append(installEnv, "NPM_CONFIG_USERCONFIG="+filepath.Join(uc, ".npmrc"))
		}
	}
	for _, k := range []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"} {
		if v, ok := os.LookupEnv(k); ok {
			installEnv = append(installEnv, k+"="+v)
			env = append(env, k+"="+v)
		}
	}

	ictx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	install := exec.CommandContext(ictx, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund",
		"--ignore-scripts", "--loglevel=error", s.Package+"@"+s.Version)
	install.Env = installEnv
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm install: %w: %s", err, tail(out))
	}

	pkgDir := filepath.Join(prefix, "node_modules", filepath.FromSlash(s.Package))
	var pj struct {
		Version string          `json:"version"`
		License json.RawMessage `json:"license"`
		Bin     json.RawMessage `json:"bin"`
	}
	b, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &pj); err != nil {
		return nil, fmt.Errorf("package.json: %w", err)
	}
	bin, err := binPath(pj.Bin, s.Bin)
	if err != nil {
		return nil, err
	}
	c := &Catalog{Server: s.ID, Package: s.Package, Version: pj.Version, License: license(pj.License)}
	// Name the licence from the first line of the file it points to, or of
	// the package's LICENSE when package.json names none.
	firstLine := func(f string) string {
		b, err := os.ReadFile(filepath.Join(pkgDir, filepath.Clean(f)))
		if err != nil {
			return ""
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		return strings.TrimSpace(first)
	}
	if f, ok := strings.CutPrefix(c.License, "SEE LICENSE IN "); ok {
		if l := firstLine(f); l != "" {
			c.License += " (" + l + ")"
		} else {
			c.License += " (the file is not in the package)"
		}
	}
	for _, f := range []string{"LICENSE", "LICENSE.md", "LICENSE.txt"} {
		if c.License == "" {
			if l := firstLine(f); l != "" {
				c.License = "not in package.json; " + f + ": " + l
			}
		}
	}

	if c.License == "" {
		// Without a licence its descriptions may not be redistributed.
		return nil, errors.New("the package names no licence")
	}
	sub := func(v string) string { return strings.ReplaceAll(v, "{tmp}", work) }
	args := []string{filepath.Join(pkgDir, filepath.FromSlash(bin))}
	for _, a := range s.Args {
		args = append(args, sub(a))
	}
	for k, v := range s.Env {
		env = append(env, k+"="+sub(v))
	}
	sctx, cancel2 := context.WithTimeout(ctx, serverTimeout)
	defer cancel2()
	tools, err := listTools(sctx, work, env, args)
	if err != nil {
		return nil, err
	}
	c.Tools = tools
	return c, nil
}

// binPath picks the package's executable: the named one, or the only one.
func binPath(raw json.RawMessage, name string) (string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return one, nil
	}
	var many map[string]string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return "", errors.New("package.json has no bin")
	}
	if name != "" {
		if p, ok := many[name]; ok {
			return p, nil
		}
		return "", fmt.Errorf("package.json has no bin %q", name)
	}
	if len(many) == 1 {
		for _, p := range many {
			return p, nil
		}
	}
	var names []string
	for n := range many {
		names = append(names, n)
	}
	return "", fmt.Errorf("package.json has several bins (%s): set \"bin\"", strings.Join(names, ", "))
}

// license renders package.json's license field (a string, or the old
// {"type": ...} object).
func license(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Type
	}
	return ""
}

// listTools starts the server and returns its tools.
func listTools(ctx context.Context, dir string, env, args []string) ([]Tool, error) {
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = env
	stderr := &limitedWriter{left: 4096}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()

	r := bufio.NewReaderSize(stdout, 1<<20)
	id := 0
	call := func(method string, params any) (json.RawMessage, error) {
		id++
		msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err != nil {
			return nil, err
		}
		if _, err := stdin.Write(append(msg, '\n')); err != nil {
			return nil, fmt.Errorf("%s: %w (stderr: %s)", method, err, stderr.String())
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return nil, fmt.Errorf("%s: %w (stderr: %s)", method, err, stderr.String())
			}
			var resp struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(line, &resp) != nil || resp.ID == nil || resp.Method != "" || *resp.ID != id {
				continue // log lines on stdout, notifications, requests to us
			}
			if resp.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, resp.Error)
			}
			return resp.Result, nil
		}
	}
	if _, err := call("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "mcp-proxy-harvest", "version": "1"},
	}); err != nil {
		return nil, err
	}
	if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		return nil, err
	}
	var tools []Tool
	cursor := ""
	for page := 0; page < 50; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := call("tools/list", params)
		if err != nil {
			return nil, err
		}
		var lr struct {
			Tools []struct {
				Tool
				Annotations struct {
					Title string `json:"title"`
				} `json:"annotations"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &lr); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range lr.Tools {
			tool := t.Tool
			if tool.Title == "" {
				tool.Title = t.Annotations.Title
			}
			tools = append(tools, tool)
		}
		if lr.NextCursor == "" {
			break
		}
		cursor = lr.NextCursor
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools (stderr: %s)", stderr.String())
	}
	return tools, nil
}

// limitedWriter keeps the first bytes of a server's stderr for error
// messages; it is written by exec's copying goroutine and read by listTools.
type limitedWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left > 0 {
		q := p
		if len(q) > l.left {
			q = q[:l.left]
		}
		l.left -= len(q)
		l.buf.Write(q)
	}
	return len(p), nil
}

func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = "..." + s[len(s)-500:]
	}
	return s
}
