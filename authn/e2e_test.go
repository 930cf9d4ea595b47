package authn

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-proxy/mcp-proxy/internal/testoidc"
)

// protected is an MCP server (the Go SDK's) behind authn, mounted the way
// the proxy's front mounts it: the metadata handler under the well-known
// path, and Authenticate before every request of /mcp and
// /agents/<a>/mcp. Each agent has its own MCP server whose whoami tool
// answers the agent's name, so a client sees where its token landed.
type protected struct {
	url     string
	a       *Authenticator
	reg     *prometheus.Registry
	mu      sync.Mutex
	callers []string // agent/method/subject of every accepted request
}

func startProtected(t *testing.T, issuer, extraAuth string) *protected {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`listen:
  transport: http
  addr: %q
  auth:
    issuer: %q
    required_scopes: [mcp]
%sagents:
  sales: {match: {groups: sales}}
  eng: {match: {groups: [eng, platform]}}
  ops: {tokens: ["${OPS_TOKEN}"]}
`, ln.Addr().String(), issuer, extraAuth)
	cfg, reg, m := parseWithMetrics(t, doc)
	p := &protected{url: "http://" + ln.Addr().String(), reg: reg,
		a: New(cfg, Options{BoundAddr: ln.Addr().String(), Metrics: m})}
	handlers := map[string]http.Handler{}
	for _, name := range cfg.AgentNames() {
		srv := mcp.NewServer(&mcp.Implementation{Name: "agent-" + name, Version: "0"}, nil)
		agent := name
		mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: agent}}}, nil, nil
		})
		handlers[name] = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	endpoint := func(pathAgent func(*http.Request) string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			who, fail := p.a.Authenticate(r, pathAgent(r))
			if fail != nil {
				fail.Write(w)
				return
			}
			// What the front does: the client's token stops here.
			r = r.Clone(r.Context())
			r.Header.Del("Authorization")
			p.mu.Lock()
			p.callers = append(p.callers, who.Agent+"/"+string(who.Method)+"/"+who.Subject)
			p.mu.Unlock()
			handlers[who.Agent].ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle(WellKnownPath, p.a.MetadataHandler())
	mux.Handle(WellKnownPath+"/", p.a.MetadataHandler())
	mux.Handle(cfg.Listen.Path, endpoint(func(*http.Request) string { return "" }))
	mux.Handle("/agents/{agent}/mcp", endpoint(func(r *http.Request) string { return r.PathValue("agent") }))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// count reads mcp_proxy_auth_total{agent,result}.
func (p *protected) count(agent, result string) float64 { return authCount(p.reg, agent, result) }

// whoami calls the whoami tool and returns the agent that answered.
func whoami(ctx context.Context, t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestOAuthFlowWithOpenIDProvider drives the whole flow with the official
// Go SDK client against a real OpenID provider: the client is refused with
// a challenge, discovers the protected resource metadata and the
// provider's metadata, logs the user in, exchanges the code, connects, and
// lands in the agent its groups claim selects.
func TestOAuthFlowWithOpenIDProvider(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op := testoidc.Start(t)
	p := startProtected(t, op.Issuer, "")

	cs, rec, err := testoidc.Connect(ctx, p.url+"/mcp", testoidc.JWTClientID, "alice", nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, rec.Log())
	}
	defer cs.Close()
	if got := whoami(ctx, t, cs); got != "eng" {
		t.Fatalf("alice (groups eng) landed in %q, want eng", got)
	}
	t.Logf("what the client saw:\n%s", rec.Log())
	if err := rec.InOrder(
		`POST /mcp -> 401 | WWW-Authenticate: Bearer scope="mcp", resource_metadata="`+p.url+`/.well-known/oauth-protected-resource/mcp"`,
		`GET /.well-known/oauth-protected-resource/mcp -> 200`,
		`GET /.well-known/openid-configuration -> 200`,
		`POST /oauth/token -> 200`,
		`POST /mcp -> 200 | Mcp-Session-Id: set`,
	); err != nil {
		t.Error(err)
	}
	p.mu.Lock()
	first := p.callers[0]
	p.mu.Unlock()
	if first != "eng/oauth/alice" {
		t.Errorf("first principal = %s, want eng/oauth/alice", first)
	}
	if p.count("", ResultMissing) != 1 || p.count("eng", ResultOK) < 2 {
		t.Errorf("metrics: missing %v, eng ok %v", p.count("", ResultMissing), p.count("eng", ResultOK))
	}

	// The same user on her agent's own endpoint; bob on the default one
	// lands in sales.
	cs2, _, err := testoidc.Connect(ctx, p.url+"/agents/eng/mcp", testoidc.JWTClientID, "alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	if got := whoami(ctx, t, cs2); got != "eng" {
		t.Errorf("/agents/eng/mcp answered as %q", got)
	}
	cs3, _, err := testoidc.Connect(ctx, p.url+"/mcp", testoidc.JWTClientID, "bob", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs3.Close()
	if got := whoami(ctx, t, cs3); got != "sales" {
		t.Errorf("bob (groups sales) landed in %q", got)
	}

	// Refused: another agent's route, and claims that match no agent.
	if _, rec, err := testoidc.Connect(ctx, p.url+"/agents/sales/mcp", testoidc.JWTClientID, "alice", nil); err == nil {
		t.Error("alice connected to /agents/sales/mcp")
	} else if err := rec.InOrder("POST /agents/sales/mcp -> 401", "POST /agents/sales/mcp -> 403"); err != nil {
		t.Errorf("route of another agent: %v", err)
	}
	if p.count("sales", ResultForbiddenAgent) < 1 {
		t.Error("forbidden_agent not counted")
	}
	if _, rec, err := testoidc.Connect(ctx, p.url+"/mcp", testoidc.JWTClientID, "carol", nil); err == nil {
		t.Error("carol (no groups) connected")
	} else if err := rec.InOrder("POST /mcp -> 401", "POST /mcp -> 403"); err != nil {
		t.Errorf("no agent: %v", err)
	}
	if p.count("", ResultNoAgent) < 1 {
		t.Error("no_agent not counted")
	}

	// A static token still opens its agent beside OAuth.
	static := &http.Client{Transport: headerTransport{"Authorization": "Bearer ops-static-token-1"}}
	cs4, err := mcp.NewClient(&mcp.Implementation{Name: "static", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: p.url + "/agents/ops/mcp", HTTPClient: static, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs4.Close()
	if got := whoami(ctx, t, cs4); got != "ops" {
		t.Errorf("static token landed in %q", got)
	}
}

// TestOpaqueTokensWithOpenIDProvider: the provider issues opaque access
// tokens to this client; the listener checks them at the provider's
// introspection endpoint, and refuses one the provider does not know.
func TestOpaqueTokensWithOpenIDProvider(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op := testoidc.Start(t)
	p := startProtected(t, op.Issuer, fmt.Sprintf("    introspection: {url: %q, client_id: %s, client_secret: %s}\n",
		op.IntrospectionEndpoint, testoidc.ResourceServerID, testoidc.ResourceServerSecret))

	cs, _, err := testoidc.Connect(ctx, p.url+"/mcp", testoidc.OpaqueClientID, "alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := whoami(ctx, t, cs); got != "eng" {
		t.Fatalf("opaque token landed in %q", got)
	}

	req, _ := http.NewRequest(http.MethodPost, p.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer an-opaque-token-the-provider-never-issued")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("inactive token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if got := testutil.CollectAndCount(p.reg, "mcp_proxy_auth_total"); got == 0 {
		t.Error("no auth metrics")
	}
	if p.count("", ResultInvalid) != 1 {
		t.Errorf("invalid count = %v", p.count("", ResultInvalid))
	}
}

// headerTransport adds fixed headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
