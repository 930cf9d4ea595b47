package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oauthUpstream is a Streamable HTTP MCP server (mcp-go) behind OAuth, with
// its own authorization server (PRM, RFC 8414 metadata, registration,
// authorize approving at once, token with PKCE): what a hosted MCP server
// looks like to the proxy. It records every Authorization header /mcp got.
type oauthUpstream struct {
	srv *httptest.Server

	mu       sync.Mutex
	codes    map[string]string // code -> PKCE challenge
	tokens   map[string]bool
	authSeen []string
}

func newOAuthUpstream(t *testing.T) *oauthUpstream {
	t.Helper()
	u := &oauthUpstream{codes: map[string]string{}, tokens: map[string]bool{}}
	mcpSrv := server.NewMCPServer("oauth-upstream", "1.0.0", server.WithToolCapabilities(true))
	mcpSrv.AddTool(mcpgo.NewTool("whoami", mcpgo.WithDescription("says who called")), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("an authorized caller"), nil
	})
	mcpHandler := server.NewStreamableHTTPServer(mcpSrv)
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		u.mu.Lock()
		u.authSeen = append(u.authSeen, h)
		ok := u.tokens[strings.TrimPrefix(h, "Bearer ")]
		u.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+u.url("/.well-known/oauth-protected-resource/mcp")+`"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		oauthJSON(w, http.StatusOK, map[string]any{"resource": u.url("/mcp"), "authorization_servers": []string{u.srv.URL}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		oauthJSON(w, http.StatusOK, map[string]any{
			"issuer": u.srv.URL, "authorization_endpoint": u.url("/authorize"), "token_endpoint": u.url("/token"),
			"registration_endpoint": u.url("/register"), "code_challenge_methods_supported": []string{"S256"},
			"response_types_supported": []string{"code"}, "token_endpoint_auth_methods_supported": []string{"none"},
		})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		oauthJSON(w, http.StatusCreated, map[string]any{"client_id": "proxy-client", "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := fmt.Sprintf("code-%d", time.Now().UnixNano())
		u.mu.Lock()
		u.codes[code] = q.Get("code_challenge")
		u.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		bq := back.Query()
		bq.Set("code", code)
		bq.Set("state", q.Get("state"))
		back.RawQuery = bq.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		u.mu.Lock()
		defer u.mu.Unlock()
		if ch, ok := u.codes[r.PostForm.Get("code")]; !ok || ch != base64.RawURLEncoding.EncodeToString(sum[:]) || r.PostForm.Get("resource") != u.url("/mcp") {
			oauthJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		delete(u.codes, r.PostForm.Get("code"))
		tok := fmt.Sprintf("upstream-access-token-%d", time.Now().UnixNano())
		u.tokens[tok] = true
		oauthJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	})
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	return u
}

func (u *oauthUpstream) url(p string) string { return u.srv.URL + p }

func (u *oauthUpstream) issued() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for t := range u.tokens {
		out = append(out, t)
	}
	return out
}

func (u *oauthUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.authSeen...)
}

func oauthJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
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
		httpServer("secure", up.url("/mcp"), "required: true", "auth: {type: oauth, open: none}"),
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
	issued := up.issued()
	if len(issued) != 1 {
		t.Fatalf("tokens issued: %d", len(issued))
	}
	for _, h := range up.seen() {
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
	cfg := writeConfig(t, "state_dir: "+q(state)+"\n", httpServer("secure", up.url("/mcp"), "auth: {type: oauth, open: none}"),
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
	if code != 0 || json.Unmarshal([]byte(status), &rows) != nil || len(rows) != 1 || rows[0]["state"] != "authorized" || rows[0]["issuer"] != up.srv.URL {
		t.Errorf("auth status (exit %d): %s", code, status)
	}
	for _, tok := range up.issued() {
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
