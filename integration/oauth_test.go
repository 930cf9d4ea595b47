package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testoauth"
)

// newOAuthUpstream starts a Streamable HTTP MCP server (mcp-go) behind
// OAuth, with its own authorization server that issues no refresh tokens:
// what a hosted MCP server looks like to the proxy. Its tool whoami
// answers "an authorized caller".
func newOAuthUpstream(t *testing.T) *testoauth.Server {
	t.Helper()
	mcpSrv := server.NewMCPServer("oauth-upstream", "1.0.0", server.WithToolCapabilities(true))
	mcpSrv.AddTool(mcpgo.NewTool("whoami", mcpgo.WithDescription("says who called")), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("an authorized caller"), nil
	})
	return testoauth.New(t, testoauth.Options{MCP: server.NewStreamableHTTPServer(mcpSrv)})
}

// logLine finds the first JSON log line with message msg and returns it.
func logLine(stderr *syncBuffer, msg string) map[string]any {
	if lines := logLines(stderr, msg); len(lines) > 0 {
		return lines[0]
	}
	return nil
}

func waitLogLine(t *testing.T, stderr *syncBuffer, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if m := logLine(stderr, msg); m != nil {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no log line %q within %s:\n%s", msg, startTimeout, tail(stderr.String(), 4000))
	return nil
}

const oauthAgentToken = "downstream-agent-token-5f3a9c"

// TestOAuthUpstreamOverHTTP: an HTTP proxy whose OAuth upstream has no
// token yet shows it as needs_auth (tools hidden, /readyz and
// mcp_proxy_upstream_up say so, the log names the login URL and command)
// while the other server serves; opening the logged URL completes the
// login, the server connects without a restart, and its tool works. The
// upstream sees only its own token, never the client's Authorization.
func TestOAuthUpstreamOverHTTP(t *testing.T) {
	t.Parallel()
	up := newOAuthUpstream(t)
	state := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf("state_dir: %s\nmetrics: {listen: 127.0.0.1:0}\nagents:\n  a: {mcp_bundles: [all], tokens: [%s]}\nbundles:\n  all: {servers: [secure, local]}\ndefault_agent: a\n", q(state), q(oauthAgentToken)),
		httpServer("secure", up.URL("/mcp"), "required: true", "auth: {type: oauth, open: none}"),
		fixtureServer("local", []string{"-no-weird"}))
	base, p := startHTTPProxy(t, cfg)
	headers := map[string]string{"Authorization": "Bearer " + oauthAgentToken}

	needs := waitLogLine(t, p.stderr, "upstream needs authorization; its tools are hidden until it is authorized")
	if needs["server"] != "secure" || needs["command"] != "mcp-proxy auth login secure" || needs["state"] != "needs_auth" {
		t.Errorf("needs-authorization line: %v", needs)
	}
	prompt := waitLogLine(t, p.stderr, "authorization needed: open the url in a browser, or run the command")
	local, _ := prompt["url"].(string)
	if !strings.HasPrefix(local, "http://127.0.0.1:") || prompt["command"] != "mcp-proxy auth login secure" {
		t.Fatalf("prompt line: %v", prompt)
	}

	cs := polMustConnect(t, base, headers, "")
	names := toolNames(listTools(t, cs))
	if hasName(names, "secure__whoami") || !hasName(names, "local__echo") {
		t.Errorf("tools while secure needs authorization: %v", names)
	}
	ready := strings.TrimSuffix(base, "/mcp") + "/readyz"
	if code, body := httpGet(t, ready); code != http.StatusServiceUnavailable || !strings.Contains(body, "secure") {
		t.Errorf("/readyz = %d %q, want 503 naming secure", code, body)
	}
	metricsURL, _ := waitLogLine(t, p.stderr, "serving metrics")["url"].(string)
	upMetric := func() string {
		_, body := httpGet(t, metricsURL)
		for line := range strings.SplitSeq(body, "\n") {
			if strings.HasPrefix(line, `mcp_proxy_upstream_up{`) && strings.Contains(line, `server="secure"}`) {
				return line
			}
		}
		return "(absent)"
	}
	if got := upMetric(); got != `mcp_proxy_upstream_up{protocol="",server="secure"} 0` {
		t.Errorf("metric while needs_auth: %s", got)
	}

	// The user opens the logged URL: it redirects to the authorization
	// server, which approves and redirects to the proxy's callback.
	if code, body := httpGet(t, local); code != http.StatusOK || !strings.Contains(body, "is authorized") {
		t.Fatalf("following the login URL: %d %q", code, body)
	}
	waitLogLine(t, p.stderr, "upstream connected")
	deadline := time.Now().Add(startTimeout)
	for !hasName(toolNames(listTools(t, cs)), "secure__whoami") {
		if time.Now().After(deadline) {
			t.Fatalf("secure__whoami not listed after the login:\n%s", tail(p.stderr.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := contentText(callTool(t, cs, "secure__whoami", map[string]any{})); got != "an authorized caller" {
		t.Errorf("secure__whoami = %q", got)
	}
	if code, _ := httpGet(t, ready); code != http.StatusOK {
		t.Errorf("/readyz = %d after the login", code)
	}
	if got := upMetric(); got != `mcp_proxy_upstream_up{protocol="2026-07-28",server="secure"} 1` {
		t.Errorf("metric after the login: %s", got)
	}
	issued := up.Issued()
	if len(issued) != 1 {
		t.Fatalf("tokens issued: %d", len(issued))
	}
	for _, h := range up.Seen() {
		if strings.Contains(h, oauthAgentToken) {
			t.Fatalf("the upstream got the client's token: %q", h)
		}
		if h != "" && h != "Bearer "+issued[0] {
			t.Errorf("the upstream got Authorization %q", h)
		}
	}
	fi, err := os.Stat(filepath.Join(state, "auth", "secure.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v", fi, err)
	}
	p.stop(t)
	if strings.Contains(p.stderr.String(), issued[0]) {
		t.Errorf("the proxy logged the access token")
	}
}

// TestOAuthLoginCLIPickUp: a stdio proxy waits in needs_auth; `tools` shows
// it; `auth login` in another process stores a token, which the running
// proxy picks up; `auth status` shows the state without the token; `auth
// logout` forgets it. Usage errors exit 2.
func TestOAuthLoginCLIPickUp(t *testing.T) {
	t.Parallel()
	up := newOAuthUpstream(t)
	state := t.TempDir()
	cfg := writeConfig(t, "state_dir: "+q(state)+"\n", httpServer("secure", up.URL("/mcp"), "auth: {type: oauth, open: none}"),
		fixtureServer("local", []string{"-no-weird"}))

	// A server that needs a login is not connected: tools exits 1 (as for
	// any server down) and names the command.
	out, _, code := runCLI(t, "tools", "--config", cfg)
	if code != 1 || !strings.Contains(out, "needs_auth") || !strings.Contains(out, "mcp-proxy auth login secure") {
		t.Errorf("tools (exit %d):\n%s", code, out)
	}

	cs, stderr := sdkStdioProxy(t, cfg, nil, nil)
	waitLogLine(t, stderr, "upstream needs authorization; its tools are hidden until it is authorized")
	res, err := cs.CallTool(testCtx(t, callTimeout), &mcp.CallToolParams{Name: "secure__whoami", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Fatalf("secure__whoami answered before any login: %v", res)
	}

	// `auth login` in another process; its stdout carries the URL.
	login := proxyCmd("auth", "login", "secure", "--config", cfg)
	stdout, err := login.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	loginErr := &syncBuffer{}
	login.Stderr = loginErr
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		printed.WriteString(line + "\n")
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "http"); ok && strings.Contains(u, "/authorize?") {
			if code, body := httpGet(t, "http"+u); code != http.StatusOK {
				t.Errorf("following the printed URL: %d %q", code, body)
			}
		}
	}
	if err := login.Wait(); err != nil {
		t.Fatalf("auth login: %v\nstdout:\n%s\nstderr:\n%s", err, printed.String(), loginErr.String())
	}
	if !strings.Contains(printed.String(), `Server "secure" is authorized`) {
		t.Errorf("auth login printed:\n%s", printed.String())
	}

	deadline := time.Now().Add(startTimeout)
	for !hasName(toolNames(listTools(t, cs)), "secure__whoami") {
		if time.Now().After(deadline) {
			t.Fatalf("the running proxy did not pick the token up:\n%s", tail(stderr.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := contentText(callTool(t, cs, "secure__whoami", map[string]any{})); got != "an authorized caller" {
		t.Errorf("secure__whoami = %q", got)
	}

	status, _, code := runCLI(t, "auth", "status", "--config", cfg, "--json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(status), &rows) != nil || len(rows) != 1 || rows[0]["state"] != "authorized" || rows[0]["issuer"] != up.Issuer() {
		t.Errorf("auth status (exit %d): %s", code, status)
	}
	for _, tok := range up.Issued() {
		if strings.Contains(status, tok) || strings.Contains(printed.String(), tok) || strings.Contains(stderr.String(), tok) {
			t.Errorf("a token was printed or logged")
		}
	}
	if out, _, code := runCLI(t, "auth", "logout", "secure", "--config", cfg); code != 0 || !strings.Contains(out, "forgot") {
		t.Errorf("auth logout (exit %d): %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(state, "auth", "secure.json")); !os.IsNotExist(err) {
		t.Errorf("token file after logout: %v", err)
	}
	for _, args := range [][]string{{"auth", "login", "nosuch"}, {"auth", "login", "local"}, {"auth"}, {"auth", "dance"}} {
		if _, errOut, code := runCLI(t, append(args, "--config", cfg)...); code != 2 {
			t.Errorf("mcp-proxy %v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: callTimeout}).Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}
