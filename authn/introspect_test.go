package authn

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// introspectionEndpoint is an RFC 7662 endpoint that knows a few opaque
// tokens and records every token it is asked about.
type introspectionEndpoint struct {
	srv   *httptest.Server
	hits  atomic.Int32
	down  atomic.Bool
	mu    sync.Mutex
	asked []string
}

func newIntrospectionEndpoint(t *testing.T, issuer func() string, tokens map[string]map[string]any) *introspectionEndpoint {
	e := &introspectionEndpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		if e.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != "rs" || secret != "rs-secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		tok := r.PostFormValue("token")
		e.mu.Lock()
		e.asked = append(e.asked, tok)
		e.mu.Unlock()
		resp := map[string]any{"active": false}
		if c, ok := tokens[tok]; ok {
			resp = map[string]any{"active": true, "iss": issuer()}
			for k, v := range c {
				resp[k] = v
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// TestIntrospection: opaque tokens are checked by the introspection
// endpoint and cached until they expire; inactive tokens are refused;
// static tokens never reach the endpoint.
func TestIntrospection(t *testing.T) {
	is := newTestIssuer(t, newRSAKey(t, "k1"))
	exp := time.Now().Add(10 * time.Minute).Unix()
	ep := newIntrospectionEndpoint(t, func() string { return is.srv.URL }, map[string]map[string]any{
		"opaque-eng":     {"sub": "u1", "scope": "mcp", "groups": []string{"eng"}, "exp": exp, "client_id": "cli"},
		"opaque-noscope": {"sub": "u2", "scope": "other", "groups": []string{"eng"}, "exp": exp},
		"opaque-otheraud": {"sub": "u3", "scope": "mcp", "groups": []string{"eng"}, "exp": exp,
			"aud": "https://elsewhere.example.com"},
		"opaque-expired": {"sub": "u4", "scope": "mcp", "groups": []string{"eng"}, "exp": time.Now().Add(-time.Hour).Unix()},
	})
	doc := strings.Replace(oauthDoc, "    required_scopes: [mcp]\n",
		"    required_scopes: [mcp]\n    introspection: {url: \""+ep.srv.URL+"\", client_id: rs, client_secret: \"${SECRET}\"}\n", 1)
	r := newRig(t, doc, is.srv.URL)

	p, f := r.auth("", "Bearer opaque-eng")
	if f != nil || p.Agent != "eng" || p.Subject != "u1" || p.ClientID != "cli" || p.Expiry.Unix() != exp {
		t.Fatalf("active token: %+v %+v", p, f)
	}
	if _, f := r.auth("", "Bearer opaque-eng"); f != nil {
		t.Fatal(f.Message)
	}
	if n := ep.hits.Load(); n != 1 {
		t.Fatalf("introspected %d times, want 1 (cached until exp)", n)
	}
	cases := map[string]string{
		"opaque-revoked":  ResultInvalid,
		"opaque-noscope":  ResultInsufficientScope,
		"opaque-otheraud": ResultWrongAudience,
		"opaque-expired":  ResultExpired,
	}
	for tok, want := range cases {
		if _, f := r.auth("", "Bearer "+tok); f == nil || f.Result != want {
			t.Errorf("%s: %+v, want %s", tok, f, want)
		}
	}
	// Inactive answers are cached too.
	hits := ep.hits.Load()
	_, _ = r.auth("", "Bearer opaque-revoked")
	if ep.hits.Load() != hits {
		t.Error("an inactive token was introspected again within inactiveTTL")
	}

	// Down: cached tokens keep working; new ones get 503.
	ep.down.Store(true)
	if _, f := r.auth("", "Bearer opaque-eng"); f != nil {
		t.Errorf("cached token while the endpoint is down: %s", f.Message)
	}
	if _, f := r.auth("", "Bearer opaque-new"); f == nil || f.Status != 503 {
		t.Errorf("uncached token while down: %+v", f)
	}
	// The cache ends at the token's exp.
	ep.down.Store(false)
	r.clock.Advance(11 * time.Minute)
	hits = ep.hits.Load()
	if _, f := r.auth("", "Bearer opaque-eng"); f == nil || f.Result != ResultExpired {
		t.Errorf("after exp: %+v", f)
	}
	if ep.hits.Load() != hits+1 {
		t.Error("an expired cache entry was not introspected again")
	}

	// A static token is recognised before introspection, on any endpoint.
	_, _ = r.auth("ops", "Bearer ops-static-token-1")
	_, _ = r.auth("eng", "Bearer ops-static-token-1")
	_, _ = r.auth("", "Bearer ops-static-token-1")
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, tok := range ep.asked {
		if strings.HasPrefix(tok, "ops-static") {
			t.Errorf("a static token was sent to the introspection endpoint")
		}
	}
}

// TestIntrospectionCacheBound: the cache never holds more than
// maxCachedTokens entries.
func TestIntrospectionCacheBound(t *testing.T) {
	in := &introspector{cache: map[[32]byte]introEntry{}}
	now := time.Now()
	for i := 0; i < maxCachedTokens+100; i++ {
		var k [32]byte
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		in.store(k, introEntry{until: now.Add(time.Hour)}, now)
	}
	if n := len(in.cache); n > maxCachedTokens {
		t.Fatalf("cache holds %d entries, bound is %d", n, maxCachedTokens)
	}
}
