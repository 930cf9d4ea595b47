package authn

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAcceptedTokenCache: a token accepted at an endpoint is taken from
// the cache on the next requests (no signature check, no claims decoded),
// yet still refused once it expires, once its key is withdrawn from a
// refetched set, and at another endpoint (another resource).
func TestAcceptedTokenCache(t *testing.T) {
	k1, k2 := newECKey(t, "k1"), newECKey(t, "k2")
	is := newTestIssuer(t, k1)
	r := newRig(t, oauthDoc, is.srv.URL)
	tok := "Bearer " + sign(t, k1, claimsAt(is.srv.URL, r.clock.Now(), func(c map[string]any) {
		c["exp"] = r.clock.Now().Add(2 * time.Minute).Unix()
	}))
	if p, f := r.auth("", tok); f != nil || p.Agent != "eng" || p.Subject != "user-1" {
		t.Fatalf("first request: %+v %+v", p, f)
	}

	t.Run("hits cost no check", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "http://proxy.test/mcp", nil)
		req.Header.Set("Authorization", tok)
		// A full check decodes the token and its claims: some 190
		// allocations. A hit hashes the token on the stack and shares the
		// entry's Principal: none.
		allocs := testing.AllocsPerRun(50, func() {
			if p, f := r.a.Authenticate(req, ""); f != nil || p.Agent != "eng" || p.Subject != "user-1" || p.Method != MethodOAuth {
				t.Fatalf("cached: %+v %+v", p, f)
			}
		})
		if allocs > 0 {
			t.Errorf("%.0f allocations per request with an accepted token, want none", allocs)
		}
		if n := r.count(t, "eng", ResultOK); n < 52 {
			t.Errorf("mcp_proxy_auth_total{agent=eng,result=ok} = %v, want every request counted (52)", n)
		}
	})

	t.Run("other endpoint", func(t *testing.T) {
		if _, f := r.auth("ops", tok); f == nil || f.Result != ResultWrongAudience {
			t.Fatalf("a token accepted at the default endpoint, at another: %+v", f)
		}
	})

	t.Run("withdrawn key", func(t *testing.T) {
		// A token accepted 50 s after the last fetch, then the set is
		// refetched (a minute after the last fetch) for a token of k2,
		// and k1 is gone from it: the cached token, good for another
		// 50 s by the cache's own bound, is checked again and refused.
		r.clock.Advance(refetchInterval + time.Second)
		if _, f := r.auth("", "Bearer "+sign(t, k1, claimsAt(is.srv.URL, r.clock.Now(), nil))); f != nil {
			t.Fatalf("a token of k1: %+v", f)
		}
		fetches := is.jwksHits.Load()
		r.clock.Advance(50 * time.Second)
		old := "Bearer " + sign(t, k1, claimsAt(is.srv.URL, r.clock.Now(), nil))
		if _, f := r.auth("", old); f != nil {
			t.Fatalf("a token of k1: %+v", f)
		}
		is.publish(k2)
		r.clock.Advance(11 * time.Second)
		if _, f := r.auth("", "Bearer "+sign(t, k2, claimsAt(is.srv.URL, r.clock.Now(), nil))); f != nil {
			t.Fatalf("a token of the new key: %+v", f)
		}
		if is.jwksHits.Load() != fetches+1 {
			t.Fatalf("JWKS fetches %d, want %d", is.jwksHits.Load(), fetches+1)
		}
		if _, f := r.auth("", old); f == nil || f.Result != ResultInvalid {
			t.Fatalf("a cached token of a withdrawn key: %+v", f)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		// exp 30 s ago: accepted within the clock skew, and refused once
		// the skew has passed too, well within the cache's own minute.
		tok2 := "Bearer " + sign(t, k2, claimsAt(is.srv.URL, r.clock.Now(), func(c map[string]any) {
			c["exp"] = r.clock.Now().Add(-30 * time.Second).Unix()
		}))
		if _, f := r.auth("", tok2); f != nil {
			t.Fatalf("a token within the skew: %+v", f)
		}
		r.clock.Advance(31 * time.Second)
		if _, f := r.auth("", tok2); f == nil || f.Result != ResultExpired {
			t.Fatalf("a cached token past its exp and the skew: %+v", f)
		}
	})
}

// TestVerifiedKey: a cache key is the SHA-256 of the endpoint's agent, a
// zero byte and the token, whether the token fits the stack buffer or not,
// so that the same token at two endpoints, or split differently between
// agent and token, never shares an entry.
func TestVerifiedKey(t *testing.T) {
	for _, n := range []int{0, 1, 600, verifiedKeyStack - 4, verifiedKeyStack - 3, verifiedKeyStack - 2, verifiedKeyStack, maxTokenBytes} {
		tok := strings.Repeat("t", n)
		for _, agent := range []string{"", "ops"} {
			if got, want := verifiedKey(tok, agent), sha256.Sum256([]byte(agent+"\x00"+tok)); got != want {
				t.Errorf("verifiedKey(%d bytes, %q) = %x, want %x", n, agent, got, want)
			}
		}
	}
	if verifiedKey("ab", "") == verifiedKey("b", "a") || verifiedKey("x", "") == verifiedKey("x", "ops") {
		t.Error("keys of different endpoints or tokens are equal")
	}
}
