package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadOnSIGHUP: SIGHUP applies an edited config without a restart
// (docs/operations.md#shutdown-and-reload): an added server connects and a removed one closes, and a
// config that does not load leaves the running one in force.
func TestReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	first := writeConfig(t, "blobs: {mode: passthrough}", fixtureServer("one", []string{"-no-weird"}))
	url, p := startHTTPProxy(t, first)
	before := sdkHTTP(t, url, nil, nil)
	if names := toolNames(listTools(t, before)); !hasName(names, "one__echo") {
		t.Fatalf("before reload: %v", names)
	}

	// Replace the server: "one" removed, "two" added.
	reloadWith(t, p, first, writeConfig(t, "blobs: {mode: passthrough}", fixtureServer("two", []string{"-no-weird"})))
	deadline := time.Now().Add(20 * time.Second)
	var names []string
	for time.Now().Before(deadline) {
		after := sdkHTTP(t, url, nil, nil)
		names = toolNames(listTools(t, after))
		if hasName(names, "two__echo") && !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "one__") }) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !hasName(names, "two__echo") || hasName(names, "one__echo") {
		t.Fatalf("after reload a new session lists %v; want two__* and no one__*", names)
	}
	if got := contentText(callTool(t, sdkHTTP(t, url, nil, nil), "two__echo", map[string]any{"text": "reloaded"})); got != "reloaded" {
		t.Fatalf("two__echo after reload: %q", got)
	}
	// The proxy logs the reload after it applied it, and its stderr reaches
	// the buffer through a pipe: wait for the line.
	waitLog(t, p.stderr, `"message":"config reloaded"`, `"added":"two"`, `"removed":"one"`)

	// A config that does not load is refused and the running one stays.
	if err := os.WriteFile(first, []byte("servers:\n  bad name: {command: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p.stderr, "config reload failed; the running config stays in force")
	if got := contentText(callTool(t, sdkHTTP(t, url, nil, nil), "two__echo", map[string]any{"text": "still"})); got != "still" {
		t.Fatalf("after a bad reload: %q", got)
	}
}

// TestReloadKeepsListenAndTokens is issue 12, item 6: a reload cannot take
// the tokens away from a listener others can reach by also moving listen to
// loopback in the file. The listen change is refused with a warning (it
// needs a restart), the token rule is checked against the address the
// listener is bound to, and such a reload is refused whole. A reload that
// changes listen but keeps the tokens applies the rest.
func TestReloadKeepsListenAndTokens(t *testing.T) {
	t.Parallel()
	tokenAgent := "bundles: {all: {servers: [one, two]}}\nagents: {a: {mcp_bundles: [all], tokens: [reload-s3cret]}}\ndefault_agent: a\n"
	openAgent := "bundles: {all: {servers: [one, two]}}\nagents: {a: {mcp_bundles: [all]}}\ndefault_agent: a\n"
	public := "blobs: {mode: passthrough}\nlisten: {transport: http, addr: \"0.0.0.0:0\"}\n"
	local := "blobs: {mode: passthrough}\nlisten: {transport: http, addr: \"127.0.0.1:0\"}\n"
	cfgPath := writeConfig(t, public+tokenAgent, fixtureServer("one", []string{"-no-weird"}))

	urls := make(chan string, 1)
	p := startProc(t, "mcp-proxy (http, 0.0.0.0)", proxyCmd("serve", "--config", cfgPath), func(line string) {
		var l struct{ Message, URL string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == servingMessage && l.URL != "" {
			select {
			case urls <- l.URL:
			default:
			}
		}
	})
	p.cleanExit = true
	var url string
	select {
	case u := <-urls:
		_, port, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "]:")
		if port == "" { // 0.0.0.0:<port>/mcp
			_, port, _ = strings.Cut(strings.TrimPrefix(u, "http://"), ":")
		}
		url = "http://127.0.0.1:" + port
	case <-time.After(startTimeout):
		t.Fatalf("no serving line:\n%s", tail(p.stderr.String(), 3000))
	}
	initStatus := func(token string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := initStatus(""); got != http.StatusUnauthorized {
		t.Fatalf("before reload, no token: HTTP %d, want 401", got)
	}
	reload := func(content string) {
		t.Helper()
		reloadWith(t, p, cfgPath, writeConfig(t, content, fixtureServer("one", []string{"-no-weird"}), fixtureServer("two", []string{"-no-weird"})))
	}
	waitLog := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(p.stderr.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("no %q log line (%d wanted):\n%s", what, n, tail(p.stderr.String(), 3000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The file moves listen to loopback and drops the token.
	reload(local + openAgent)
	waitLog("listen changed; it takes effect only after a restart", 1)
	waitLog("config reload failed; the running config stays in force", 1)
	if got := initStatus(""); got != http.StatusUnauthorized {
		t.Fatalf("after a reload that dropped the tokens, no token: HTTP %d, want 401", got)
	}
	if !strings.Contains(p.stderr.String(), "tokens: required because listen.addr") {
		t.Errorf("the refusal does not say why:\n%s", tail(p.stderr.String(), 3000))
	}

	// The file moves listen but keeps the token, and adds a server: the
	// server is added, the listener stays where it is.
	reload(local + tokenAgent)
	waitLog("listen changed; it takes effect only after a restart", 2)
	waitLog(`"added":"two"`, 1)
	if got := initStatus("reload-s3cret"); got != http.StatusOK {
		t.Errorf("with the token after the second reload: HTTP %d, want 200", got)
	}
	if got := initStatus(""); got != http.StatusUnauthorized {
		t.Errorf("without a token after the second reload: HTTP %d, want 401", got)
	}
}

// A reload whose file moves a loopback listener to a public address while
// its agents have no tokens is not refused for a listen it does not apply
// (here --listen keeps the listener where it is): the running listener,
// bound to loopback where no token is required, is what the rules judge,
// and the rest of the file applies. (Before, the file's own listen was
// judged first and the whole reload refused.)
func TestReloadIgnoresListenItCannotApply(t *testing.T) {
	t.Parallel()
	agents := "bundles: {all: {servers: [one, two]}}\nagents: {a: {mcp_bundles: [all]}}\ndefault_agent: a\n"
	cfgPath := writeConfig(t, "blobs: {mode: passthrough}\n"+agents, fixtureServer("one", []string{"-no-weird"}))
	url, p := startHTTPProxy(t, cfgPath)
	reloadWith(t, p, cfgPath, writeConfig(t, "blobs: {mode: passthrough}\nlisten: {transport: http, addr: \"0.0.0.0:0\"}\n"+agents,
		fixtureServer("one", []string{"-no-weird"}), fixtureServer("two", []string{"-no-weird"})))
	waitLog(t, p.stderr, "config reloaded", `"added":"two"`)
	if s := p.stderr.String(); strings.Contains(s, "config reload failed") {
		t.Errorf("the reload was refused:\n%s", tail(s, 3000))
	}
	if got := contentText(callTool(t, sdkHTTP(t, url, nil, nil), "two__echo", map[string]any{"text": "added"})); got != "added" {
		t.Errorf("two__echo after the reload: %q", got)
	}
}

// reloadWith puts the config written at from in place of the running
// proxy's file cfgPath and sends the proxy SIGHUP.
func reloadWith(t *testing.T, p *proc, cfgPath, from string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
