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
