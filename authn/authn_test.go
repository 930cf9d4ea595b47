package authn

import (
	"bytes"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const oauthDoc = `listen:
  transport: http
  public_url: "https://mcp.example.com"
  auth:
    issuer: "$ISSUER"
    required_scopes: [mcp]
agents:
  ops:
    match: {groups: ops}
    tokens: ["${OPS_TOKEN}"]
  eng:
    match: {groups: [eng, platform]}
  num:
    match: {level: "3", verified: "true"}
  local:
    autonomy: full
`

// claimsFor returns valid claims for the default endpoint, changed by mod.
func claimsFor(issuer string, mod func(map[string]any)) map[string]any {
	return claimsAt(issuer, time.Now(), mod)
}

// claimsAt is claimsFor at another time.
func claimsAt(issuer string, now time.Time, mod func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss": issuer, "sub": "user-1", "aud": "https://mcp.example.com/mcp",
		"exp": now.Add(10 * time.Minute).Unix(), "iat": now.Unix(), "nbf": now.Add(-time.Second).Unix(),
		"scope": "openid mcp", "groups": []string{"eng"}, "azp": "cli",
	}
	if mod != nil {
		mod(c)
	}
	return c
}

// hs256 forges an HMAC-signed token whose secret is the given bytes (the
// issuer's public key, in some encoding an attacker can get).
func hs256(t *testing.T, kid string, secret []byte, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT", "kid": kid})
	p, _ := json.Marshal(claims)
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + enc.EncodeToString(mac.Sum(nil))
}

// unsigned forges an alg "none" token.
func unsigned(claims map[string]any) string {
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	p, _ := json.Marshal(claims)
	return enc.EncodeToString(h) + "." + enc.EncodeToString(p) + "."
}

// TestAccessTokens runs every token case against one issuer: what is
// accepted, what is refused with which status, challenge and metric.
func TestAccessTokens(t *testing.T) {
	key := newRSAKey(t, "k1")
	ecKey := newECKey(t, "k2")
	is := newTestIssuer(t, key, ecKey)
	iss := is.srv.URL
	r := newRig(t, oauthDoc, iss)
	pub := key.priv.Public().(*rsa.PublicKey)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	jwkJSON, _ := json.Marshal(map[string]any{"kty": "RSA", "kid": "k1",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()), "e": "AQAB"})
	rogue := newRSAKey(t, "rogue")
	bearer := func(tok string) string { return "Bearer " + tok }
	with := func(mod func(map[string]any)) string { return bearer(sign(t, key, claimsFor(iss, mod))) }

	tests := []struct {
		name       string
		pathAgent  string
		auth       string
		wantAgent  string
		wantStatus int
		wantResult string
		wantHeader string // substring of WWW-Authenticate; "-" means none
	}{
		{name: "valid JWT on the default endpoint", auth: with(nil), wantAgent: "eng"},
		{name: "scheme is case-insensitive", auth: "bearer " + sign(t, key, claimsFor(iss, nil)), wantAgent: "eng"},
		{name: "ES256 key", auth: bearer(sign(t, ecKey, claimsFor(iss, nil))), wantAgent: "eng"},
		{name: "first agent in config order wins", auth: with(func(c map[string]any) { c["groups"] = []string{"eng", "ops"} }), wantAgent: "ops"},
		{name: "aud is the bare public URL", auth: with(func(c map[string]any) { c["aud"] = []string{"https://mcp.example.com/"} }), wantAgent: "eng"},
		{name: "numbers and booleans by JSON text", pathAgent: "num", auth: with(func(c map[string]any) {
			c["aud"] = "https://mcp.example.com/agents/num/mcp"
			c["level"], c["verified"] = 3, true
		}), wantAgent: "num"},
		{name: "expired within the 60 s skew", auth: with(func(c map[string]any) { c["exp"] = time.Now().Add(-30 * time.Second).Unix() }), wantAgent: "eng"},
		{name: "scp array instead of scope", auth: with(func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"mcp"} }), wantAgent: "eng"},

		{name: "no token", wantStatus: 401, wantResult: ResultMissing,
			wantHeader: `Bearer scope="mcp", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`},
		{name: "basic credentials are no token", auth: "Basic dXNlcjpwdw==", wantStatus: 401, wantResult: ResultMissing, wantHeader: `resource_metadata=`},
		{name: "expired", auth: with(func(c map[string]any) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }),
			wantStatus: 401, wantResult: ResultExpired, wantHeader: `error="invalid_token", error_description="The access token expired"`},
		{name: "no exp", auth: with(func(c map[string]any) { delete(c, "exp") }), wantStatus: 401, wantResult: ResultInvalid, wantHeader: `error="invalid_token"`},
		{name: "not yet valid", auth: with(func(c map[string]any) { c["nbf"] = time.Now().Add(5 * time.Minute).Unix() }), wantStatus: 401, wantResult: ResultInvalid},
		{name: "issued in the future", auth: with(func(c map[string]any) { c["iat"] = time.Now().Add(5 * time.Minute).Unix() }), wantStatus: 401, wantResult: ResultInvalid},
		{name: "another audience", auth: with(func(c map[string]any) { c["aud"] = "https://other.example.com/mcp" }),
			wantStatus: 401, wantResult: ResultWrongAudience, wantHeader: `error_description="The access token is for another resource"`},
		{name: "token of an agent endpoint used on the default one", auth: with(func(c map[string]any) { c["aud"] = "https://mcp.example.com/agents/eng/mcp" }),
			wantStatus: 401, wantResult: ResultWrongAudience},
		{name: "no aud", auth: with(func(c map[string]any) { delete(c, "aud") }), wantStatus: 401, wantResult: ResultWrongAudience},
		{name: "another issuer", auth: with(func(c map[string]any) { c["iss"] = "https://evil.example.com" }), wantStatus: 401, wantResult: ResultInvalid},
		{name: "signed with an unknown key", auth: bearer(sign(t, rogue, claimsFor(iss, nil))), wantStatus: 401, wantResult: ResultInvalid},
		{name: "unknown key posing as a known kid", auth: bearer(sign(t, &testKey{kid: "k1", alg: rogue.alg, priv: rogue.priv}, claimsFor(iss, nil))), wantStatus: 401, wantResult: ResultInvalid},
		{name: "alg none", auth: bearer(unsigned(claimsFor(iss, nil))), wantStatus: 401, wantResult: ResultInvalid},
		{name: "HMAC keyed with the public key PEM", auth: bearer(hs256(t, "k1", pemKey, claimsFor(iss, nil))), wantStatus: 401, wantResult: ResultInvalid},
		{name: "HMAC keyed with the public key DER", auth: bearer(hs256(t, "k1", der, claimsFor(iss, nil))), wantStatus: 401, wantResult: ResultInvalid},
		{name: "HMAC keyed with the public JWK", auth: bearer(hs256(t, "k1", jwkJSON, claimsFor(iss, nil))), wantStatus: 401, wantResult: ResultInvalid},
		{name: "tampered payload", auth: bearer(tamper(sign(t, key, claimsFor(iss, nil)))), wantStatus: 401, wantResult: ResultInvalid},
		{name: "garbage", auth: "Bearer not-a-token", wantStatus: 401, wantResult: ResultInvalid},
		{name: "missing scope", auth: with(func(c map[string]any) { c["scope"] = "openid" }),
			wantStatus: 403, wantResult: ResultInsufficientScope,
			wantHeader: `Bearer error="insufficient_scope", error_description="The access token lacks a required scope", scope="mcp", resource_metadata=`},
		{name: "claims match no agent", auth: with(func(c map[string]any) { c["groups"] = []string{"sales"} }), wantStatus: 403, wantResult: ResultNoAgent, wantHeader: "-"},
		{name: "groups as a string", auth: with(func(c map[string]any) { c["groups"] = "platform" }), wantAgent: "eng"},

		{name: "own agent route", pathAgent: "eng", auth: with(func(c map[string]any) { c["aud"] = "https://mcp.example.com/agents/eng/mcp" }), wantAgent: "eng"},
		{name: "route of another agent", pathAgent: "ops", auth: with(func(c map[string]any) { c["aud"] = "https://mcp.example.com/agents/ops/mcp" }),
			wantStatus: 403, wantResult: ResultForbiddenAgent, wantHeader: "-"},
		{name: "agent without match", pathAgent: "local", auth: with(func(c map[string]any) { c["aud"] = "https://mcp.example.com/" }),
			wantStatus: 403, wantResult: ResultForbiddenAgent},
		{name: "agent route challenge", pathAgent: "eng", wantStatus: 401, wantResult: ResultMissing,
			wantHeader: `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/agents/eng/mcp"`},

		{name: "static token beside OAuth", pathAgent: "ops", auth: "Bearer ops-static-token-1", wantAgent: "ops"},
		{name: "static token of another agent", pathAgent: "eng", auth: "Bearer ops-static-token-1", wantStatus: 403, wantResult: ResultForbiddenAgent},
		{name: "static token on the default endpoint without default_agent", auth: "Bearer ops-static-token-1", wantStatus: 403, wantResult: ResultForbiddenAgent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			label := tt.pathAgent
			before := r.count(t, label, tt.wantResult)
			p, f := r.auth(tt.pathAgent, tt.auth)
			if tt.wantAgent != "" {
				if f != nil {
					t.Fatalf("refused: %d %s %q (%s)", f.Status, f.Result, f.Message, f.Header.Get("WWW-Authenticate"))
				}
				if p.Agent != tt.wantAgent {
					t.Fatalf("agent = %q, want %q", p.Agent, tt.wantAgent)
				}
				if got := r.count(t, p.Agent, ResultOK); got < 1 {
					t.Errorf("mcp_proxy_auth_total{agent=%q,result=ok} = %v", p.Agent, got)
				}
				return
			}
			if f == nil {
				t.Fatalf("accepted as %+v, want %d %s", p, tt.wantStatus, tt.wantResult)
			}
			if f.Status != tt.wantStatus || f.Result != tt.wantResult {
				t.Fatalf("got %d %s (%q), want %d %s", f.Status, f.Result, f.Message, tt.wantStatus, tt.wantResult)
			}
			got := f.Header.Get("WWW-Authenticate")
			switch {
			case tt.wantHeader == "-" && got != "":
				t.Errorf("WWW-Authenticate = %q, want none", got)
			case tt.wantHeader != "-" && !strings.Contains(got, tt.wantHeader):
				t.Errorf("WWW-Authenticate = %q, want it to contain %q", got, tt.wantHeader)
			}
			if n := r.count(t, label, tt.wantResult); n != before+1 {
				t.Errorf("mcp_proxy_auth_total{agent=%q,result=%q} went from %v to %v", label, tt.wantResult, before, n)
			}
		})
	}
}

// tamper flips the payload of a JWS (keeping it valid base64url JSON).
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	p = []byte(strings.Replace(string(p), `"eng"`, `"ops"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(p)
	return strings.Join(parts, ".")
}

// TestPrincipal: what an accepted access token tells the front.
func TestPrincipal(t *testing.T) {
	key := newRSAKey(t, "k1")
	is := newTestIssuer(t, key)
	r := newRig(t, oauthDoc, is.srv.URL)
	exp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	tok := sign(t, key, claimsFor(is.srv.URL, func(c map[string]any) { c["exp"] = exp.Unix() }))
	p, f := r.auth("", "Bearer "+tok)
	if f != nil {
		t.Fatal(f.Message)
	}
	want := Principal{Agent: "eng", Method: MethodOAuth, TokenIndex: -1, Subject: "user-1", ClientID: "cli", Scopes: []string{"openid", "mcp"}, Expiry: exp}
	if p.Agent != want.Agent || p.Method != want.Method || p.TokenIndex != -1 || p.Subject != want.Subject ||
		p.ClientID != want.ClientID || strings.Join(p.Scopes, " ") != "openid mcp" || !p.Expiry.Equal(exp) {
		t.Errorf("principal = %+v, want %+v", *p, want)
	}
	p, f = r.auth("ops", "Bearer ops-static-token-1")
	if f != nil || p.Method != MethodStatic || p.TokenIndex != 0 || p.Subject != "" {
		t.Errorf("static: %+v %v", p, f)
	}
}

// TestUnknownAgentEndpoint: an endpoint without a configured agent is 404
// with a fixed text (anyone may ask: it names neither the agents nor the
// path), and is no authentication outcome; the detail goes to the debug
// log.
func TestUnknownAgentEndpoint(t *testing.T) {
	is := newTestIssuer(t, newRSAKey(t, "k1"))
	r := newRig(t, oauthDoc, is.srv.URL)
	var logs bytes.Buffer
	r.a.log = zerolog.New(&logs).Level(zerolog.DebugLevel)
	_, f := r.auth("nobody", "")
	if f == nil || f.Status != http.StatusNotFound || f.Result != "" {
		t.Fatalf("failure = %+v", f)
	}
	w := newRecorder()
	f.Write(w)
	if body := w.Body.String(); w.Code != http.StatusNotFound || body != "Not Found: unknown agent\n" {
		t.Errorf("HTTP %d %q, want 404 %q", w.Code, body, "Not Found: unknown agent\n")
	}
	if line := logs.String(); !strings.Contains(line, `"agent":"nobody"`) || !strings.Contains(line, `"agents":["eng","local","num","ops"]`) {
		t.Errorf("debug log %q, want the path's agent and the agents", line)
	}
}

// TestFailureWrite: the bytes a client receives for a refusal.
func TestFailureWrite(t *testing.T) {
	is := newTestIssuer(t, newRSAKey(t, "k1"))
	r := newRig(t, oauthDoc, is.srv.URL)
	_, f := r.auth("eng", "")
	w := newRecorder()
	f.Write(w)
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") !=
		`Bearer scope="mcp", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/agents/eng/mcp"` ||
		w.Body.String() != "Unauthorized: a bearer token is required; WWW-Authenticate names the protected resource metadata\n" {
		t.Errorf("wrote %d %q %q", w.Code, w.Header(), w.Body.String())
	}
}

// TestTokenGoesNowhere: Authenticate leaves the request as it came, and
// neither the Principal nor a Failure holds the token.
func TestTokenGoesNowhere(t *testing.T) {
	key := newRSAKey(t, "k1")
	is := newTestIssuer(t, key)
	r := newRig(t, oauthDoc, is.srv.URL)
	for _, tok := range []string{sign(t, key, claimsFor(is.srv.URL, nil)), "ops-static-token-1",
		sign(t, key, claimsFor(is.srv.URL, func(c map[string]any) { c["groups"] = "none" }))} {
		req := httptest.NewRequest(http.MethodPost, "http://proxy.test/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		before := req.Header.Clone()
		p, f := r.a.Authenticate(req, "")
		if !reflect.DeepEqual(req.Header, before) {
			t.Errorf("headers changed: %v", req.Header)
		}
		if s := fmt.Sprintf("%+v %+v", p, f); strings.Contains(s, tok) {
			t.Errorf("the token is in the result: %s", s)
		}
	}
}
