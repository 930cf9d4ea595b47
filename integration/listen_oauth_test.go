package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/testoidc"
)

// The HTTP listener as an OAuth protected resource (docs/security.md#oauth-on-the-http-listener), through
// the real binary: an in-process OpenID provider (internal/testoidc), the
// official Go SDK client's OAuth flow, agents chosen by the groups claim,
// a static-token agent beside them, and an HTTP fixture upstream that
// records every header it receives.

// Static tokens of the ops agent (its first and second).
const (
	loOpsToken1 = "ops-static-token-1-9c2e7a"
	loOpsToken2 = "ops-static-token-2-41d0b8"
)

// loProxy is a running proxy under listen.auth and what the tests read.
type loProxy struct {
	op      *testoidc.Provider
	base    string // http://127.0.0.1:<port>, the public URL
	mcp     string // base + "/mcp"
	metrics string // the metrics page
	p       *proc
	headers string // what the dev upstream received (FIXTURE_RECORD_HEADERS)

	mu     sync.Mutex
	tokens []string // every credential a client sent, for the leak checks
}

// loStart starts the provider, the upstreams and the proxy. Agents: sales
// (groups sales, bundle crm), eng (groups eng or platform, bundle dev),
// ops (two static tokens, both bundles). dev is an HTTP fixture, crm a
// stdio one.
func loStart(t *testing.T) *loProxy {
	t.Helper()
	return loStartWith(t, "")
}

// loStartWith is loStart with more top-level config lines (extraTop, each
// ending in a newline).
func loStartWith(t *testing.T, extraTop string) *loProxy {
	t.Helper()
	lp := &loProxy{op: testoidc.Start(t), headers: filepath.Join(t.TempDir(), "dev.headers.jsonl")}
	dev := startFixtureHTTPEnv(t, []string{"FIXTURE_RECORD_HEADERS=" + lp.headers}, "-name", "dev", "-no-weird")
	top := extraTop + fmt.Sprintf(`metrics: {listen: "127.0.0.1:0"}
listen:
  transport: http
  auth:
    issuer: %s
    required_scopes: [mcp]
bundles:
  dev: {servers: [dev]}
  crm: {servers: [crm]}
agents:
  sales: {mcp_bundles: [crm], match: {groups: sales}}
  eng: {mcp_bundles: [dev], match: {groups: [eng, platform]}}
  ops: {mcp_bundles: [dev, crm], tokens: [%s, %s]}
`, q(lp.op.Issuer), q(loOpsToken1), q(loOpsToken2))
	cfg := writeConfig(t, top,
		httpServer("dev", dev, "required: true"),
		fixtureServer("crm", []string{"-name", "crm", "-no-weird"}, "required: true"))
	lp.mcp, lp.p = startHTTPProxy(t, cfg)
	lp.base = strings.TrimSuffix(lp.mcp, "/mcp")
	lp.metrics = sfMetricsURL(t, lp.p.stderr)
	lp.sent(loOpsToken1, loOpsToken2)
	t.Cleanup(lp.checkNoLeak(t))
	return lp
}

// sent notes credentials a client sent.
func (lp *loProxy) sent(tokens ...string) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.tokens = append(lp.tokens, tokens...)
}

// connect runs the SDK client's OAuth flow as user against endpoint; the
// session closes when the test ends. proto "" is the SDK's choice (the
// stateless 2026-07-28 protocol, which the proxy serves).
func (lp *loProxy) connect(t *testing.T, endpoint, user, proto string) (*mcp.ClientSession, *testoidc.Wire, error) {
	t.Helper()
	var sopts *mcp.ClientSessionOptions
	if proto != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: proto}
	}
	cs, wire, err := testoidc.Connect(testCtx(t, startTimeout), endpoint, testoidc.JWTClientID, user, sopts)
	lp.sent(wire.Tokens()...)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, wire, err
}

// mustConnect is connect that must succeed.
func (lp *loProxy) mustConnect(t *testing.T, endpoint, user, proto string) (*mcp.ClientSession, *testoidc.Wire) {
	t.Helper()
	cs, wire, err := lp.connect(t, endpoint, user, proto)
	if err != nil {
		t.Fatalf("%s at %s: %v\n%s", user, endpoint, err, wire.Log())
	}
	return cs, wire
}

// token logs user in for resource (scopes default to mcp).
func (lp *loProxy) token(t *testing.T, user, resource string, scopes ...string) string {
	t.Helper()
	tok, err := lp.op.Token(testCtx(t, callTimeout), user, resource, scopes...)
	if err != nil {
		t.Fatalf("token for %s at %s: %v", user, resource, err)
	}
	lp.sent(tok)
	return tok
}

// auth reads mcp_proxy_auth_total{agent,result}; absent is 0.
func (lp *loProxy) auth(t *testing.T, agent, result string) float64 {
	t.Helper()
	return max(0, sfMetric(t, lp.metrics, "mcp_proxy_auth_total", `agent="`+agent+`"`, `result="`+result+`"`))
}

// checkNoLeak returns the cleanup that checks, once the proxy has stopped,
// that no credential a client sent reached the upstream, the metrics or
// the proxy's log (debug level).
func (lp *loProxy) checkNoLeak(t *testing.T) func() {
	return func() {
		page, err := lp.scrape()
		if err != nil {
			t.Errorf("scraping the metrics to look for tokens: %v", err)
		}
		lp.p.stop(t)
		// The dev upstream is required, so it recorded at least the
		// proxy's initialize: a missing file is a failure too.
		up, err := os.ReadFile(lp.headers)
		if err != nil {
			t.Errorf("reading what the upstream received to look for tokens: %v", err)
		}
		lp.mu.Lock()
		defer lp.mu.Unlock()
		for _, tok := range lp.tokens {
			for where, text := range map[string]string{"the upstream": string(up), "the metrics": page, "the proxy's log": lp.p.stderr.String()} {
				if strings.Contains(text, tok) {
					t.Errorf("%s holds a client's token (%.12s…)", where, tok)
				}
			}
		}
	}
}

// scrape returns the proxy's metrics page.
func (lp *loProxy) scrape() (string, error) {
	resp, err := (&http.Client{Timeout: callTimeout}).Get(lp.metrics)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", lp.metrics, resp.Status)
	}
	return string(b), err
}

// loRequest sends one request to the proxy and returns its status, headers
// and body.
func loRequest(t *testing.T, method, url string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t, callTimeout), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

// loBearer is the Authorization header of tok.
func loBearer(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

const loListBody = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`

// loServerTools returns the servers whose tools cs lists.
func loServerTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var servers []string
	for _, name := range toolNames(listTools(t, cs)) {
		if s, _, ok := strings.Cut(name, "__"); ok && !slices.Contains(servers, s) {
			servers = append(servers, s)
		}
	}
	slices.Sort(servers)
	return servers
}

// TestListenOAuthFlow: the SDK client is refused with a challenge naming
// the endpoint's metadata, reads it and the provider's metadata, logs the
// user in, and lands in the agent the groups claim selects, which sees
// only its bundle's tools. Another agent's endpoint is 403 after the
// login, claims matching no agent are 403, and the serving line names the
// public and metadata URLs.
func TestListenOAuthFlow(t *testing.T) {
	t.Parallel()
	lp := loStart(t)
	serving := logLine(lp.p.stderr, servingMessage)
	if serving["public_url"] != lp.mcp || serving["resource_metadata"] != lp.base+"/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("serving line: %v", serving)
	}
	missing0, eng0 := lp.auth(t, "", "missing"), lp.auth(t, "eng", "ok")

	// The SDK's default (the stateless protocol: no session), then
	// 2025-11-25 (a session).
	for _, proto := range []struct{ version, connected string }{
		{"", `POST /mcp -> 200`},
		{"2025-11-25", `POST /mcp -> 200 | Mcp-Session-Id: set`},
	} {
		alice, wire := lp.mustConnect(t, lp.mcp, "alice", proto.version)
		t.Logf("what the SDK client saw (alice on /mcp, protocol %q):\n%s", proto.version, wire.Log())
		if err := wire.InOrder(
			`POST /mcp -> 401 | WWW-Authenticate: Bearer scope="mcp", resource_metadata="`+lp.base+`/.well-known/oauth-protected-resource/mcp"`,
			`GET /.well-known/oauth-protected-resource/mcp -> 200`,
			`GET /.well-known/openid-configuration -> 200`,
			`POST /oauth/token -> 200`,
			proto.connected,
		); err != nil {
			t.Error(err)
		}
		if got := loServerTools(t, alice); !slices.Equal(got, []string{"dev"}) {
			t.Errorf("alice (groups eng) sees the tools of %v, want [dev] (agent eng)", got)
		}
		if got := contentText(callTool(t, alice, "dev__echo", map[string]any{"text": "from alice"})); got != "from alice" {
			t.Errorf("dev__echo = %q", got)
		}
	}
	if d := lp.auth(t, "", "missing") - missing0; d != 2 {
		t.Errorf("mcp_proxy_auth_total{agent=\"\",result=\"missing\"} rose by %v, want 2 (one per login)", d)
	}
	lp.checkUpstreamHeaders(t)
	if lp.auth(t, "eng", "ok") <= eng0 {
		t.Error(`mcp_proxy_auth_total{agent="eng",result="ok"} did not rise`)
	}

	// The metadata documents the client read, as served.
	for _, tc := range []struct{ path, resource string }{
		{"/.well-known/oauth-protected-resource/mcp", lp.mcp},
		{"/.well-known/oauth-protected-resource/agents/eng/mcp", lp.base + "/agents/eng/mcp"},
		{"/.well-known/oauth-protected-resource", lp.base},
	} {
		code, h, body := loRequest(t, http.MethodGet, lp.base+tc.path, nil, "")
		var doc struct {
			Resource string   `json:"resource"`
			AS       []string `json:"authorization_servers"`
			Scopes   []string `json:"scopes_supported"`
			Methods  []string `json:"bearer_methods_supported"`
		}
		if code != http.StatusOK || h.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &doc) != nil ||
			doc.Resource != tc.resource || !slices.Equal(doc.AS, []string{lp.op.Issuer}) ||
			!slices.Equal(doc.Scopes, []string{"mcp"}) || !slices.Equal(doc.Methods, []string{"header"}) {
			t.Errorf("GET %s: %d %q %s", tc.path, code, h.Get("Content-Type"), body)
		}
	}
	if code, _, _ := loRequest(t, http.MethodGet, lp.base+"/.well-known/oauth-protected-resource/agents/nobody/mcp", nil, ""); code != http.StatusNotFound {
		t.Errorf("metadata of an agent that does not exist: %d, want 404", code)
	}

	// bob lands in sales; alice on her agent's own endpoint in eng.
	bob, _ := lp.mustConnect(t, lp.mcp, "bob", "")
	if got := loServerTools(t, bob); !slices.Equal(got, []string{"crm"}) {
		t.Errorf("bob (groups sales) sees the tools of %v, want [crm] (agent sales)", got)
	}
	alice2, wire := lp.mustConnect(t, lp.base+"/agents/eng/mcp", "alice", "")
	if got := loServerTools(t, alice2); !slices.Equal(got, []string{"dev"}) {
		t.Errorf("alice on /agents/eng/mcp sees the tools of %v", got)
	}
	if err := wire.InOrder(`POST /agents/eng/mcp -> 401 | WWW-Authenticate: Bearer scope="mcp", resource_metadata="` + lp.base + `/.well-known/oauth-protected-resource/agents/eng/mcp"`); err != nil {
		t.Error(err)
	}

	// alice on sales' endpoint: the login succeeds, the token is refused
	// with 403 and no challenge (another token would not help).
	// The SDK retries a refused request once after asking its handler, and
	// falls back from the stateless protocol to initialize: every 403 the
	// client saw is one count.
	forbidden0, salesMissing0 := lp.auth(t, "sales", "forbidden_agent"), lp.auth(t, "sales", "missing")
	refused := 0
	if _, wire, err := lp.connect(t, lp.base+"/agents/sales/mcp", "alice", ""); err == nil {
		t.Error("alice connected to /agents/sales/mcp")
	} else {
		t.Logf("what the SDK client saw (alice on /agents/sales/mcp):\n%s", wire.Log())
		if err := wire.InOrder(
			`POST /agents/sales/mcp -> 401 | WWW-Authenticate: Bearer scope="mcp", resource_metadata="`+lp.base+`/.well-known/oauth-protected-resource/agents/sales/mcp"`,
			`GET /.well-known/oauth-protected-resource/agents/sales/mcp -> 200`,
			`POST /oauth/token -> 200`,
			`POST /agents/sales/mcp -> 403`,
		); err != nil {
			t.Error(err)
		}
		refused = loCount(wire, "POST /agents/sales/mcp -> 403")
		if slices.ContainsFunc(wire.Lines(), func(l string) bool { return strings.HasPrefix(l, "POST /agents/sales/mcp -> 403 |") }) {
			t.Errorf("the 403 carries a challenge:\n%s", wire.Log())
		}
	}
	if d := lp.auth(t, "sales", "forbidden_agent") - forbidden0; d != float64(refused) || refused == 0 {
		t.Errorf(`mcp_proxy_auth_total{agent="sales",result="forbidden_agent"} rose by %v; the client saw %d 403s`, d, refused)
	}
	if d := lp.auth(t, "sales", "missing") - salesMissing0; d != 1 {
		t.Errorf(`mcp_proxy_auth_total{agent="sales",result="missing"} rose by %v, want 1`, d)
	}
	tok := lp.token(t, "alice", lp.base+"/agents/sales/mcp")
	code, h, body := loRequest(t, http.MethodPost, lp.base+"/agents/sales/mcp", loBearer(tok), polInitBody)
	if code != http.StatusForbidden || h.Get("WWW-Authenticate") != "" || strings.TrimSpace(body) != `Forbidden: the token's claims do not match agent "sales"` {
		t.Errorf("alice's token on /agents/sales/mcp: %d %q %q", code, h.Get("WWW-Authenticate"), body)
	}

	// carol's claims match no agent.
	noAgent0 := lp.auth(t, "", "no_agent")
	refused = 0
	if _, wire, err := lp.connect(t, lp.mcp, "carol", ""); err == nil {
		t.Error("carol (no groups) connected")
	} else if err := wire.InOrder("POST /mcp -> 401", "POST /oauth/token -> 200", "POST /mcp -> 403"); err != nil {
		t.Error(err)
	} else {
		refused = loCount(wire, "POST /mcp -> 403")
	}
	if d := lp.auth(t, "", "no_agent") - noAgent0; d != float64(refused) || refused == 0 {
		t.Errorf(`mcp_proxy_auth_total{agent="",result="no_agent"} rose by %v; the client saw %d 403s`, d, refused)
	}
}

// loCount counts the wire's lines that are exactly line.
func loCount(w *testoidc.Wire, line string) int {
	n := 0
	for _, l := range w.Lines() {
		if l == line {
			n++
		}
	}
	return n
}

// TestListenOAuthRefusals: tokens the listener must refuse, with the
// answer a client sees and the count.
func TestListenOAuthRefusals(t *testing.T) {
	t.Parallel()
	lp := loStart(t)
	challenge := func(path, errCode, desc string) string {
		return `Bearer error="` + errCode + `", error_description="` + desc + `", scope="mcp", resource_metadata="` +
			lp.base + `/.well-known/oauth-protected-resource` + path + `"`
	}
	tests := []struct {
		name      string
		path      string
		token     func() string
		status    int
		challenge string
		agent     string // label of the count
		result    string
	}{
		{
			name:   "no token",
			path:   "/mcp",
			token:  func() string { return "" },
			status: http.StatusUnauthorized, challenge: `Bearer scope="mcp", resource_metadata="` + lp.base + `/.well-known/oauth-protected-resource/mcp"`,
			result: "missing",
		},
		{
			name:   "a token for another server",
			path:   "/mcp",
			token:  func() string { return lp.token(t, "alice", "https://other.example.com/mcp") },
			status: http.StatusUnauthorized, challenge: challenge("/mcp", "invalid_token", "The access token is for another resource"),
			result: "wrong_audience",
		},
		{
			name:   "a token for another endpoint of this proxy",
			path:   "/mcp",
			token:  func() string { return lp.token(t, "alice", lp.base+"/agents/eng/mcp") },
			status: http.StatusUnauthorized, challenge: challenge("/mcp", "invalid_token", "The access token is for another resource"),
			result: "wrong_audience",
		},
		{
			name:   "a token without the required scope",
			path:   "/mcp",
			token:  func() string { return lp.token(t, "alice", lp.mcp, "openid") },
			status: http.StatusForbidden, challenge: challenge("/mcp", "insufficient_scope", "The access token lacks a required scope"),
			result: "insufficient_scope",
		},
		{
			name:   "a forged token",
			path:   "/agents/eng/mcp",
			token:  func() string { return "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9." },
			status: http.StatusUnauthorized, challenge: challenge("/agents/eng/mcp", "invalid_token", "The access token is invalid"),
			agent: "eng", result: "invalid",
		},
		{
			name:   "alice's token for sales' endpoint",
			path:   "/agents/sales/mcp",
			token:  func() string { return lp.token(t, "alice", lp.base+"/agents/sales/mcp") },
			status: http.StatusForbidden,
			agent:  "sales", result: "forbidden_agent",
		},
		{
			name:   "an access token on the route of an agent with static tokens only",
			path:   "/agents/ops/mcp",
			token:  func() string { return lp.token(t, "alice", lp.base+"/agents/ops/mcp") },
			status: http.StatusForbidden,
			agent:  "ops", result: "forbidden_agent",
		},
		{
			name:   "a static token on another agent's route",
			path:   "/agents/eng/mcp",
			token:  func() string { return loOpsToken1 },
			status: http.StatusForbidden,
			agent:  "eng", result: "forbidden_agent",
		},
		{
			name:   "a static token on the default endpoint (no default_agent)",
			path:   "/mcp",
			token:  func() string { return loOpsToken1 },
			status: http.StatusForbidden,
			result: "forbidden_agent",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := lp.auth(t, tt.agent, tt.result)
			var h map[string]string
			if tok := tt.token(); tok != "" {
				h = loBearer(tok)
			}
			code, hdr, body := loRequest(t, http.MethodPost, lp.base+tt.path, h, polInitBody)
			t.Logf("POST %s -> %d | WWW-Authenticate: %s | %s", tt.path, code, hdr.Get("WWW-Authenticate"), strings.TrimSpace(body))
			if code != tt.status || hdr.Get("WWW-Authenticate") != tt.challenge {
				t.Errorf("POST %s: %d, WWW-Authenticate %q\nwant %d, %q", tt.path, code, hdr.Get("WWW-Authenticate"), tt.status, tt.challenge)
			}
			if d := lp.auth(t, tt.agent, tt.result) - before; d != 1 {
				t.Errorf("mcp_proxy_auth_total{agent=%q,result=%q} rose by %v, want 1", tt.agent, tt.result, d)
			}
		})
	}

	// One accepted request counts one ok.
	ok0 := lp.auth(t, "eng", "ok")
	if code, _, body := loRequest(t, http.MethodPost, lp.mcp, loBearer(lp.token(t, "dave", lp.mcp)), polInitBody); code != http.StatusOK {
		t.Errorf("dave's initialize: %d %s", code, body)
	}
	if d := lp.auth(t, "eng", "ok") - ok0; d != 1 {
		t.Errorf(`mcp_proxy_auth_total{agent="eng",result="ok"} rose by %v, want 1`, d)
	}

	// The counter's labels are agent and result only, and the page names
	// no user (the tokens are checked when the test ends).
	resp, err := http.Get(lp.metrics)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	labels := regexp.MustCompile(`(?m)^mcp_proxy_auth_total\{([^}]*)\} `)
	found := labels.FindAllSubmatch(page, -1)
	if len(found) == 0 {
		t.Fatal("no mcp_proxy_auth_total samples")
	}
	for _, m := range found {
		if !regexp.MustCompile(`^agent="[a-z]*",result="[a-z_]+"$`).Match(m[1]) {
			t.Errorf("mcp_proxy_auth_total{%s}: labels other than agent and result", m[1])
		}
	}
	for _, user := range []string{"alice", "dave"} {
		if bytes.Contains(page, []byte(user)) {
			t.Errorf("the metrics name the user %s", user)
		}
	}
}

// TestListenOAuthStaticBeside: a static token opens its agent beside
// OAuth, and its sessions are its own.
func TestListenOAuthStaticBeside(t *testing.T) {
	t.Parallel()
	lp := loStart(t)
	ops := polMustConnect(t, lp.base+"/agents/ops/mcp", loBearer(loOpsToken1), "2025-11-25")
	if got := loServerTools(t, ops); !slices.Equal(got, []string{"crm", "dev"}) {
		t.Errorf("ops (static token) sees the tools of %v, want [crm dev]", got)
	}
	if got := contentText(callTool(t, ops, "dev__echo", map[string]any{"text": "from ops"})); got != "from ops" {
		t.Errorf("dev__echo = %q", got)
	}
	// The agent's other token is another client: the session is unknown to
	// it; the same token goes on.
	sid := ops.ID()
	h := loBearer(loOpsToken2)
	h["Mcp-Session-Id"] = sid
	if code, _, body := loRequest(t, http.MethodPost, lp.base+"/agents/ops/mcp", h, loListBody); code != http.StatusNotFound {
		t.Errorf("ops' second token with the first's session: %d %.200s, want 404", code, body)
	}
	h["Authorization"] = "Bearer " + loOpsToken1
	if code, _, body := loRequest(t, http.MethodPost, lp.base+"/agents/ops/mcp", h, loListBody); code != http.StatusOK {
		t.Errorf("ops' first token with its own session: %d %.200s, want 200", code, body)
	}
	lp.checkUpstreamHeaders(t)
}

// TestListenOAuthSessionOfAnotherUser: a session id is bound to the token
// subject that opened it: another user of the same agent gets 404 for
// every method, the same user with a fresh token goes on.
func TestListenOAuthSessionOfAnotherUser(t *testing.T) {
	t.Parallel()
	lp := loStart(t)
	alice, _ := lp.mustConnect(t, lp.mcp, "alice", "2025-11-25")
	sid := alice.ID()
	if sid == "" {
		t.Fatal("no session id")
	}
	dave := loBearer(lp.token(t, "dave", lp.mcp))
	dave["Mcp-Session-Id"] = sid
	for _, m := range []struct{ method, body string }{
		{http.MethodPost, loListBody},
		{http.MethodGet, ""},
		{http.MethodDelete, ""},
	} {
		if code, _, body := loRequest(t, m.method, lp.mcp, dave, m.body); code != http.StatusNotFound {
			t.Errorf("dave (eng) %s with alice's session: %d %.200s, want 404", m.method, code, body)
		}
	}
	again := loBearer(lp.token(t, "alice", lp.mcp))
	again["Mcp-Session-Id"] = sid
	if code, _, body := loRequest(t, http.MethodPost, lp.mcp, again, loListBody); code != http.StatusOK || !strings.Contains(body, `"dev__echo"`) {
		t.Errorf("alice with a new token and her session: %d %.300s", code, body)
	}
	// dave's DELETE did not end it.
	if got := contentText(callTool(t, alice, "dev__echo", map[string]any{"text": "still mine"})); got != "still mine" {
		t.Errorf("alice's session after dave's attempts: %q", got)
	}
	lp.checkUpstreamHeaders(t)
}

// checkUpstreamHeaders: the HTTP upstream got requests, none with an
// Authorization header (the proxy has no credential of its own for it,
// and passes none of the client's).
func (lp *loProxy) checkUpstreamHeaders(t *testing.T) {
	t.Helper()
	lines := sfRecordLines(t, lp.headers)
	calls := 0
	for _, l := range lines {
		var rec struct {
			HTTP struct {
				Header http.Header `json:"header"`
			} `json:"http"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("headers record %q: %v", l, err)
		}
		if v := rec.HTTP.Header.Values("Authorization"); len(v) > 0 {
			t.Errorf("the upstream received Authorization (%d values)", len(v))
		}
		if rec.HTTP.Header.Get("Mcp-Session-Id") != "" {
			calls++
		}
	}
	if calls == 0 {
		t.Errorf("the upstream recorded no request within a session: %q", lines)
	}
}

// TestCLIValidateListenAuth: the OAuth listener's config errors, from the
// binary: exit 2 and a message naming the key; a loopback issuer is
// allowed, and an unreachable agent on a loopback listener is a warning.
// The introspection secret is never printed.
func TestCLIValidateListenAuth(t *testing.T) {
	t.Parallel()
	const secret = "intro-s3cret-value-5e1f"
	auth := func(issuer string) string {
		return "  auth:\n    issuer: " + q(issuer) + "\n    introspection: {url: \"https://login.example.com/introspect\", client_id: mcp-proxy, client_secret: " + q(secret) + "}\n"
	}
	tests := []struct {
		name string
		args []string // after the config; default validate
		top  string
		code int
		want string
	}{
		{
			name: "issuer not https",
			top:  "listen:\n  transport: http\n" + auth("http://login.example.com") + "agents:\n  eng: {match: {groups: eng}}\n",
			code: 2, want: "listen.auth.issuer: must be https:// (http:// only for a loopback host)",
		},
		{
			name: "match without listen.auth",
			top:  "listen: {transport: http}\nagents:\n  eng: {match: {groups: eng}}\n",
			code: 2, want: "agents.eng.match: needs listen.auth: without an OAuth issuer there are no token claims to match",
		},
		{
			name: "agent without tokens or match on a public listener",
			top: "listen:\n  transport: http\n  addr: \"0.0.0.0:8080\"\n  public_url: https://mcp.example.com\n" + auth("https://login.example.com") +
				"agents:\n  eng: {match: {groups: eng}}\n  open: {autonomy: full}\n",
			code: 2, want: `agents.open: needs tokens or match because listen.addr "0.0.0.0:8080" is not a loopback address`,
		},
		{
			name: "serve --listen on every interface",
			args: []string{"serve", "--listen", "0.0.0.0:0"},
			top:  "listen:\n  transport: http\n" + auth("https://login.example.com") + "agents:\n  eng: {match: {groups: eng}}\n  open: {autonomy: full}\n",
			code: 2, want: `agents.open: needs tokens or match because listen.addr "0.0.0.0:0" is not a loopback address`,
		},
		{
			name: "loopback issuer, unreachable agent on a loopback listener",
			top:  "listen:\n  transport: http\n" + auth("http://127.0.0.1:9000") + "agents:\n  eng: {match: {groups: eng}}\n  open: {autonomy: full}\n",
			code: 0, want: "warning: agents.open: neither tokens nor match, so it cannot be reached over HTTP while listen.auth is set",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, tt.top)
			verb := tt.args
			if verb == nil {
				verb = []string{"validate"}
			}
			args := slices.Concat(verb, []string{"--config", cfg})
			stdout, stderr, code := runCLI(t, args...)
			out := stdout + stderr
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("mcp-proxy %s: exit %d\n%s\nwant exit %d and %q", strings.Join(args[:1], " "), code, out, tt.code, tt.want)
			}
			if strings.Contains(out, secret) {
				t.Errorf("the introspection secret was printed:\n%s", out)
			}
		})
	}
}
