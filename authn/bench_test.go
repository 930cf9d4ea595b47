package authn

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkAuthenticateJWT is one request of the default endpoint with a
// valid JWT access token, the keys already fetched: what listen.auth adds
// to every request (docs/performance.md).
func BenchmarkAuthenticateJWT(b *testing.B) {
	for _, k := range []*testKey{newECKey(b, "ec-1"), newRSAKey(b, "rsa-1")} {
		b.Run(string(k.alg), func(b *testing.B) {
			is := newTestIssuer(b, k)
			r := newRig(b, oauthDoc, is.srv.URL)
			tok := sign(b, k, claimsFor(is.srv.URL, nil))
			req := httptest.NewRequest(http.MethodPost, "http://proxy.test/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			if _, f := r.a.Authenticate(req, ""); f != nil {
				b.Fatalf("refused: %+v", f)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, f := r.a.Authenticate(req, ""); f != nil {
					b.Fatalf("refused: %+v", f)
				}
			}
		})
	}
}

// BenchmarkAuthenticateStatic is one request of an agent's endpoint with
// one of its static tokens, and one of an agent that needs none.
func BenchmarkAuthenticateStatic(b *testing.B) {
	r := newRig(b, staticDoc, "")
	for _, c := range []struct{ name, agent, auth string }{{"token", "ops", "Bearer ops-static-token-2"}, {"none", "open", ""}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodPost, "http://proxy.test/mcp", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, f := r.a.Authenticate(req, c.agent); f != nil {
					b.Fatalf("refused: %+v", f)
				}
			}
		})
	}
}
