package authn

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

const staticDoc = `listen:
  transport: http
agents:
  ops:
    tokens: ["${OPS_TOKEN}", "${OPS_TOKEN2}"]
  open:
    autonomy: full
default_agent: ops
`

// TestStaticTokens: without listen.auth the rules of docs/agents.md#over-http hold as they
// did before OAuth: an agent with tokens needs one (any of them), an agent
// without needs none, and the refusal is the same 401 as ever.
func TestStaticTokens(t *testing.T) {
	r := newRig(t, staticDoc, "")
	tests := []struct {
		name, pathAgent, auth string
		wantMethod            Method
		wantIndex             int
		wantResult            string
	}{
		{"second token", "ops", "Bearer ops-static-token-2", MethodStatic, 1, ""},
		{"default endpoint serves default_agent", "", "Bearer ops-static-token-1", MethodStatic, 0, ""},
		{"agent without tokens needs none", "open", "", MethodNone, -1, ""},
		{"agent without tokens ignores one", "open", "Bearer whatever", MethodNone, -1, ""},
		{"missing", "ops", "", "", 0, ResultMissing},
		{"wrong", "ops", "Bearer ops-static-token-3", "", 0, ResultInvalid},
		{"prefix of a token", "ops", "Bearer ops-static-token-", "", 0, ResultInvalid},
		{"other scheme", "ops", "Basic ops-static-token-1", "", 0, ResultMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, f := r.auth(tt.pathAgent, tt.auth)
			if tt.wantResult == "" {
				if f != nil {
					t.Fatalf("refused: %+v", f)
				}
				if p.Method != tt.wantMethod || p.TokenIndex != tt.wantIndex {
					t.Fatalf("principal = %+v", p)
				}
				return
			}
			if f == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if f.Status != 401 || f.Result != tt.wantResult ||
				f.Header.Get("WWW-Authenticate") != `Bearer realm="mcp-proxy"` ||
				f.Message != `Unauthorized: a valid bearer token for agent "ops" is required` {
				t.Fatalf("failure = %+v", f)
			}
		})
	}
	if got := r.count(t, "ops", ResultOK); got != 2 {
		t.Errorf("ok count = %v, want 2", got)
	}
	if got := r.count(t, "open", ResultOK); got != 0 {
		t.Errorf("open endpoints are counted: %v", got)
	}
}

// TestNoDefaultAgent: the default endpoint without default_agent is 404
// listing the agents, as before.
func TestNoDefaultAgent(t *testing.T) {
	r := newRig(t, "listen: {transport: http}\nagents:\n  b: {}\n  a: {}\n", "")
	_, f := r.auth("", "")
	if f == nil || f.Status != 404 || f.Message != "unknown agent: no agent named and no default_agent set; agents: a, b" {
		t.Fatalf("failure = %+v", f)
	}
}

// TestImplicitAgent: no agents, no auth: the implicit agent, open.
func TestImplicitAgent(t *testing.T) {
	r := newRig(t, "listen: {transport: http}\n", "")
	p, f := r.auth("", "")
	if f != nil || p.Agent != "default" || p.Method != MethodNone {
		t.Fatalf("%+v %+v", p, f)
	}
	if _, f := r.auth("x", ""); f == nil || f.Status != 404 || f.Message != "Not Found: unknown agent" {
		t.Fatalf("unknown agent: %+v", f)
	}
}

// TestStaticBearer: the metrics listener's check of metrics.tokens takes a
// header as agents' static tokens are taken.
func TestStaticBearer(t *testing.T) {
	tokens := []string{"s3cret", "other"}
	for header, want := range map[string]bool{
		"Bearer s3cret": true, "bearer other": true, "Bearer  s3cret ": true,
		"": false, "Bearer": false, "Bearer ": false, "Bearer s3cre": false, "Basic s3cret": false,
		"Bearer s3cret2": false, "Bearer " + strings.Repeat("a", maxTokenBytes+1): false,
	} {
		if got := StaticBearer(header, tokens); got != want {
			t.Errorf("StaticBearer(%.40q) = %v, want %v", header, got, want)
		}
	}
	if StaticBearer("Bearer x", nil) {
		t.Error("no tokens allowed a header")
	}
}

// TestFixedPrincipals: a request without a token or with a static one gets
// the whole Principal of its agent and method, without allocating, with or
// without listen.auth and without any agent configured (the implicit one).
func TestFixedPrincipals(t *testing.T) {
	is := newTestIssuer(t, newECKey(t, "k1"))
	for _, tc := range []struct {
		name, doc, issuer, pathAgent, auth string
		want                               Principal
	}{
		{"static token", staticDoc, "", "ops", "Bearer ops-static-token-2", Principal{Agent: "ops", Method: MethodStatic, TokenIndex: 1}},
		{"default endpoint", staticDoc, "", "", "Bearer ops-static-token-1", Principal{Agent: "ops", Method: MethodStatic, TokenIndex: 0}},
		{"agent without tokens", staticDoc, "", "open", "", Principal{Agent: "open", Method: MethodNone, TokenIndex: -1}},
		{"implicit agent", "listen: {transport: http}\n", "", "", "", Principal{Agent: "default", Method: MethodNone, TokenIndex: -1}},
		{"static token beside OAuth", oauthDoc, is.srv.URL, "ops", "Bearer ops-static-token-1", Principal{Agent: "ops", Method: MethodStatic, TokenIndex: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.doc, tc.issuer)
			req := httptest.NewRequest(http.MethodPost, "http://proxy.test/mcp", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if p, f := r.a.Authenticate(req, tc.pathAgent); f != nil || !reflect.DeepEqual(*p, tc.want) {
				t.Fatalf("Authenticate = %+v, %+v; want %+v", p, f, tc.want)
			}
			allocs := testing.AllocsPerRun(20, func() {
				if p, f := r.a.Authenticate(req, tc.pathAgent); f != nil || p.Agent != tc.want.Agent {
					t.Fatalf("Authenticate = %+v, %+v; want %+v", p, f, tc.want)
				}
			})
			if allocs > 0 {
				t.Errorf("%.0f allocations per request, want none", allocs)
			}
		})
	}
}
