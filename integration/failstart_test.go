package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// failingConfig has one working fixture and two servers that cannot start:
// a command that does not exist, and the fixture exiting at once.
func failingConfig(t testing.TB) string {
	t.Helper()
	return writeConfig(t, "",
		fixtureServer("ok", []string{"-no-weird"}),
		stdioServer("ghost", filepath.Join(t.TempDir(), "no-such-mcp-server"), nil),
		fixtureServer("dead", []string{"-exit-at-start"}),
	)
}

// TestFailedUpstreamsDoNotBlockOthers: servers that fail to start do not keep
// the others from being listed and called, and the first tools/list does
// not wait out startup_wait for them.
func TestFailedUpstreamsDoNotBlockOthers(t *testing.T) {
	t.Parallel()
	cs, _ := sdkStdioProxy(t, failingConfig(t), nil, nil)
	start := time.Now()
	names := toolNames(listTools(t, cs))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the first tools/list took %s; failed servers must not hold it until startup_wait (10s)", took)
	}
	if !hasName(names, "ok__echo") {
		t.Errorf("tools/list lacks ok__echo: %v", names)
	}
	for _, n := range names {
		if !proxyOwnTool[n] && !strings.HasPrefix(n, "ok__") {
			t.Errorf("tools/list has %s, which no working server offers", n)
		}
	}
	if got := contentText(callTool(t, cs, "ok__echo", map[string]any{"text": "alive"})); got != "alive" {
		t.Errorf("ok__echo: %q", got)
	}
	// A tool of a granted server that never connected: the error says the
	// server is down and why (its exit, its last stderr lines), not
	// "unknown tool", which would hide the cause.
	werr, _ := callErr(t, cs, "dead__echo", map[string]any{"text": "x"}, callTimeout)
	if werr.Code != -32000 || !strings.HasPrefix(werr.Message, "MCP server 'dead' is not connected") || !strings.Contains(werr.Message, "exit") {
		t.Errorf("dead__echo (never listed): code %d message %q, want -32000 naming the server and why", werr.Code, werr.Message)
	}
	werr, _ = callErr(t, cs, "nobody__echo", map[string]any{}, callTimeout)
	if werr.Code != -32602 || werr.Message != "unknown tool: nobody__echo" {
		t.Errorf("nobody__echo: code %d message %q, want -32602 unknown tool", werr.Code, werr.Message)
	}
}

// TestToolsVerbReportsFailedServers: `mcp-proxy tools --json` shows each
// failed server with state "failed" and a reason, the working one with its
// tools, and exits 1 (a server is not connected).
func TestToolsVerbReportsFailedServers(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := runCLI(t, "tools", "--json", "--config", failingConfig(t))
	if code != 1 {
		t.Fatalf("mcp-proxy tools --json exited %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, tail(stderr, 4000))
	}
	var rep struct {
		Servers []struct {
			Name  string `json:"name"`
			State string `json:"state"`
			Error string `json:"error"`
			Tools []struct {
				Name     string `json:"name"`
				Original string `json:"original"`
			} `json:"tools"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("tools --json output is not JSON: %v\n%s", err, stdout)
	}
	seen := map[string]bool{}
	for _, s := range rep.Servers {
		seen[s.Name] = true
		switch s.Name {
		case "ok":
			if s.State != "connected" || s.Error != "" {
				t.Errorf("ok: state %q error %q, want connected", s.State, s.Error)
			}
			found := false
			for _, tool := range s.Tools {
				if tool.Name == "ok__echo" && tool.Original == "echo" {
					found = true
				}
			}
			if !found {
				t.Errorf("ok: tools lack ok__echo (original echo): %+v", s.Tools)
			}
		case "ghost", "dead":
			if s.State != "failed" {
				t.Errorf("%s: state %q, want failed", s.Name, s.State)
			}
			if s.Error == "" {
				t.Errorf("%s: no reason given for the failure", s.Name)
			}
			t.Logf("%s: %s: %s", s.Name, s.State, s.Error)
			if len(s.Tools) != 0 {
				t.Errorf("%s: lists tools %+v", s.Name, s.Tools)
			}
		default:
			t.Errorf("unexpected server %q in the report", s.Name)
		}
	}
	for _, n := range []string{"ok", "ghost", "dead"} {
		if !seen[n] {
			t.Errorf("the report lacks server %s:\n%s", n, stdout)
		}
	}
}
