package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// fixtureDir holds the fixture binary, built once for the whole package.
var (
	fixtureDir  string
	fixtureOnce sync.Once
	fixturePath string
	fixtureErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcp-proxy-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureDir = dir
	// Default state (tool pins, blob files) goes to the test's directory,
	// never to the user's home.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	os.Setenv("HOME", filepath.Join(dir, "home"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stateEnv is the environment config.Parse sees in tests that parse a
// config themselves: only XDG_STATE_HOME, a temp dir of the test, so that
// the default state (pins, blobs) lands there.
func stateEnv(t *testing.T) func(string) (string, bool) {
	dir := t.TempDir()
	return func(k string) (string, bool) {
		if k == "XDG_STATE_HOME" {
			return dir, true
		}
		return "", false
	}
}

// fixtureBin builds the integration fixture (the upstream MCP server of the
// tests) once and returns its path.
func fixtureBin(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		fixturePath = filepath.Join(fixtureDir, "fixture")
		out, err := exec.Command("go", "build", "-o", fixturePath, "../../integration/fixture").CombinedOutput()
		if err != nil {
			fixtureErr = fmt.Errorf("go build fixture: %v\n%s", err, out)
		}
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixturePath
}

// syncBuffer is an io.Writer safe for concurrent use (logs are written from
// several goroutines).
type syncBuffer = testproc.Buffer

// runCLI runs the program in-process with empty stdin.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	err = run(ctx, args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v (%T) carries no exit code", err, err)
	}
	return ee.code
}

// fixtureConfig is a config whose one server "fx" is the fixture.
func fixtureConfig(t *testing.T) string {
	t.Helper()
	return writeFile(t, "mcp-proxy.yaml", fmt.Sprintf(`
startup_wait: 30s
blobs:
  mode: passthrough
log:
  level: warn
servers:
  fx:
    command: %q
    args: ["-name", "fx"]
    connect_timeout: 30s
`, fixtureBin(t)))
}

func TestVersion(t *testing.T) {
	stdout, stderr, err := runCLI(t, "version")
	if err != nil || stdout != "mcp-proxy "+version+"\n" || stderr != "" {
		t.Fatalf("version: %v, stdout %q, stderr %q", err, stdout, stderr)
	}
}

func TestValidateGoodConfig(t *testing.T) {
	path := writeFile(t, "good.yaml", `
servers:
  files:
    command: npx
    args: ["-y", "server-filesystem", "/tmp"]
  off:
    url: https://example.com/mcp
    enabled: false
`)
	stdout, _, err := runCLI(t, "validate", "--config", path)
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	want := `warning: agents: none defined, so the implicit agent "default" gets every enabled server with autonomy full` + "\n" +
		path + ": config OK: 2 servers (1 enabled)\n"
	if stdout != want {
		t.Errorf("stdout =\n%s\nwant\n%s", stdout, want)
	}
}

func TestValidateBadConfig(t *testing.T) {
	const headerSecret = "hdr-s3cr3t-value-0123456789"
	const envSecret = "env-s3cr3t-value-9876543210"
	const token = "ghp_0123456789abcdefABCDEF0123456789abcd"
	tests := []struct {
		name    string
		yaml    string
		paths   []string // key paths the error must name
		secrets []string
	}{
		{
			name: "remote server",
			yaml: `
servers:
  remote:
    url: https://example.com/mcp
    timeout: 900s
    headers:
      Authorization: "Bearer ` + token + `"
      X-Api-Key: "` + headerSecret + `\x01"
`,
			paths:   []string{"servers.remote.timeout", "servers.remote.headers"},
			secrets: []string{token, headerSecret},
		},
		{
			name: "stdio server",
			yaml: `
servers:
  local:
    command: npx
    env:
      API_TOKEN: "` + envSecret + `"
      BAD: "a\0b"
    headers:
      Authorization: "Bearer ` + token + `"
`,
			paths:   []string{"servers.local.env.BAD", "servers.local.headers"},
			secrets: []string{envSecret, token},
		},
		{
			// One run names the document's problems and the rules' (issue
			// 13 item 5), and still shows no secret.
			name: "every kind at once",
			yaml: `
listen: {transport: http, addr: "0.0.0.0:8080"}
servers:
  remote:
    url: ftp://example.com/mcp
    timout: 30s
    timeout: 900s
    headers:
      Authorization: "Bearer ` + token + `"
      X-Api-Key: "${UNSET_KEY}"
`,
			paths:   []string{"servers.remote.timout", "servers.remote.headers.X-Api-Key", "UNSET_KEY", "servers.remote.timeout", "servers.remote.url", "listen.addr"},
			secrets: []string{token},
		},
		{
			name: "url credentials",
			yaml: `
servers:
  r2:
    url: "ftp://user:pw-s3cr3t-xyz@example.com/mcp?api_key=q-s3cr3t-123"
`,
			paths:   []string{"servers.r2.url"},
			secrets: []string{"pw-s3cr3t-xyz", "q-s3cr3t-123"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "bad.yaml", tt.yaml)
			stdout, stderr, err := runCLI(t, "validate", "--config", path)
			if code := exitCode(t, err); code != exitUsage {
				t.Fatalf("exit code %d (%v), want %d", code, err, exitUsage)
			}
			for _, p := range tt.paths {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not name %s", err, p)
				}
			}
			all := stdout + stderr + err.Error()
			for _, s := range tt.secrets {
				if strings.Contains(all, s) {
					t.Errorf("secret %q printed:\n%s", s, all)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	good := writeFile(t, "good.yaml", "servers:\n  files:\n    command: npx\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown verb", []string{"frobnicate"}, `unknown verb "frobnicate"`},
		{"unknown flag", []string{"validate", "--nope"}, "nope"},
		{"validate with two configs", []string{"validate", "--config", good, "extra"}, "two configs"},
		{"validate with two files", []string{"validate", good, good}, "usage"},
		{"call without name", []string{"call", "--config", good}, "usage"},
		{"call with bad JSON", []string{"call", "--config", good, "files__x", "{not json"}, "not valid JSON"},
		{"import without file", []string{"import"}, "usage"},
		{"missing config file", []string{"validate", "--config", filepath.Join(t.TempDir(), "none.yaml")}, "none.yaml"},
		{"bad transport", []string{"validate", "--config", good, "--transport", "carrier-pigeon"}, "--transport"},
		{"serve unknown agent", []string{"serve", "--config", good, "--agent", "nobody"}, "nobody"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCLI(t, tt.args...)
			if code := exitCode(t, err); code != exitUsage {
				t.Fatalf("exit code %d (%v), want %d", code, err, exitUsage)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestImport(t *testing.T) {
	path := writeFile(t, "claude_desktop_config.json", `{
  "mcpServers": {
    "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "github": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_TOKEN}"}},
    "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"}},
    "old": {"command": "uvx", "args": ["mcp-server-time"], "disabled": true}
  },
  "globalShortcut": "Ctrl+Space"
}`)
	stdout, _, err := runCLI(t, "import", path)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	env := func(name string) (string, bool) {
		if name == "HOME" {
			return "/home/user", true
		}
		return "value", true
	}
	cfg, err := config.Parse([]byte(stdout), env)
	if err != nil {
		t.Fatalf("config.Parse of the imported YAML: %v\n%s", err, stdout)
	}
	for _, name := range []string{"filesystem", "github", "remote", "old"} {
		if cfg.Servers[name] == nil {
			t.Errorf("server %s missing from the import:\n%s", name, stdout)
		}
	}
	if s := cfg.Servers["github"]; s != nil && s.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "value" {
		t.Errorf("github env = %v, want the ${GH_TOKEN} reference kept", s.Env)
	}
	if s := cfg.Servers["old"]; s != nil && s.IsEnabled() {
		t.Error("a disabled entry was imported enabled")
	}
}

func TestImportBadFile(t *testing.T) {
	path := writeFile(t, "bad.json", `{"mcpServers": [1, 2]}`)
	_, _, err := runCLI(t, "import", path)
	if code := exitCode(t, err); code != exitUsage {
		t.Errorf("exit code %d (%v), want %d", code, err, exitUsage)
	}
}

// toolsJSON runs `tools --json` and decodes its output.
func toolsJSON(t *testing.T, args ...string) toolsReport {
	t.Helper()
	stdout, stderr, err := runCLI(t, append([]string{"tools", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("tools --json: %v\nstderr:\n%s", err, stderr)
	}
	var rep toolsReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("tools --json output is not JSON: %v\n%s", err, stdout)
	}
	return rep
}

func TestToolsJSON(t *testing.T) {
	path := fixtureConfig(t)
	rep := toolsJSON(t, "--config", path)
	if rep.Agent != "default" || len(rep.Servers) != 1 {
		t.Fatalf("report = %+v", rep)
	}
	s := rep.Servers[0]
	if s.Name != "fx" || s.State != "connected" || s.Error != "" {
		t.Errorf("server = %+v", s)
	}
	found := false
	for _, tool := range s.Tools {
		if tool.Name == "fx__echo" {
			found = true
			if tool.Original != "echo" || tool.Description == "" {
				t.Errorf("fx__echo = %+v", tool)
			}
		}
	}
	if !found {
		t.Errorf("fx__echo not listed: %+v", s.Tools)
	}

	// A per-call allow-list narrows the list to exactly its names.
	rep = toolsJSON(t, "--config", path, "--allowed-tools", "fx__echo,fx__sleep")
	var names []string
	for _, tool := range rep.Servers[0].Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "fx__echo,fx__sleep" {
		t.Errorf("with --allowed-tools: %v", names)
	}
}

func TestToolsText(t *testing.T) {
	stdout, stderr, err := runCLI(t, "tools", "--config", fixtureConfig(t))
	if err != nil {
		t.Fatalf("tools: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "fx") || !strings.Contains(stdout, "connected") || !strings.Contains(stdout, "fx__echo") {
		t.Errorf("tools output:\n%s", stdout)
	}
}

func TestCall(t *testing.T) {
	path := fixtureConfig(t)
	stdout, stderr, err := runCLI(t, "call", "--config", path, "fx__echo", `{"text":"hi"}`)
	if err != nil {
		t.Fatalf("call fx__echo: %v\n%s", err, stderr)
	}
	var result struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(stdout), &result); err != nil {
		t.Fatalf("call output is not JSON: %v\n%s", err, stdout)
	}
	if len(result.Content) != 1 || result.Content[0].Text != "hi" {
		t.Errorf("call output = %s", stdout)
	}

	_, _, err = runCLI(t, "call", "--config", path, "nope")
	if code := exitCode(t, err); code != exitRuntime {
		t.Errorf("call nope: exit code %d (%v), want %d", code, err, exitRuntime)
	}
	if err != nil && !strings.Contains(err.Error(), "unknown tool: nope") {
		t.Errorf("call nope: error %q", err)
	}

	stdout, _, err = runCLI(t, "call", "--config", path, "fx__tool_error")
	if code := exitCode(t, err); code != exitRuntime {
		t.Errorf("call fx__tool_error: exit code %d (%v), want %d", code, err, exitRuntime)
	}
	if !strings.Contains(stdout, "this tool always fails") {
		t.Errorf("call fx__tool_error printed %q, want the result", stdout)
	}
}

func TestServeStdio(t *testing.T) {
	path := fixtureConfig(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve", "--config", path}, inR, outW, &stderr)
		outW.Close()
		done <- err
	}()
	var lines []string
	linesDone := make(chan struct{})
	got := make(chan string, 100)
	go func() {
		defer close(linesDone)
		defer close(got)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			got <- sc.Text()
		}
	}()
	recv := func(id string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-got:
				if !ok {
					t.Fatalf("stdout closed waiting for id %s; stderr:\n%s", id, stderr.String())
				}
				lines = append(lines, l)
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal([]byte(l), &m) == nil && string(m.ID) == id {
					return l
				}
			case <-time.After(45 * time.Second):
				t.Fatalf("no response with id %s; stderr:\n%s", id, stderr.String())
			}
		}
	}
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if r := recv(`1`); !strings.Contains(r, `"serverInfo"`) {
		t.Errorf("initialize response: %s", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if r := recv(`2`); !strings.Contains(r, `"name":"fx__echo"`) {
		t.Errorf("tools/list response lacks fx__echo: %.500s", r)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after stdin EOF")
	}
	for l := range got {
		lines = append(lines, l)
	}
	<-linesDone
	for _, l := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
			t.Errorf("stdout line is not JSON-RPC: %q", l)
		}
	}
	if strings.Contains(stderr.String(), `"level":"error"`) {
		t.Errorf("errors logged:\n%s", stderr.String())
	}
}

// TestMetricsPortTaken: a metrics listener that cannot bind is a warning;
// the proxy keeps serving (docs/operations.md#shutdown-and-reload).
func TestMetricsPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg, err := config.Parse([]byte("blobs: {mode: passthrough}\nmetrics: {listen: \""+taken.Addr().String()+"\"}\n"), stateEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	lns, err := bindListeners(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := startRuntime(context.Background(), cfg, &stderr, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	stop := rt.serveMetrics(cfg, lns.metrics, lns.metricsErr)
	stop()
	if !strings.Contains(stderr.String(), "metrics listener not started; the proxy keeps serving") ||
		!strings.Contains(stderr.String(), `"level":"warn"`) {
		t.Fatalf("no warning for the taken port:\n%s", stderr.String())
	}
}
