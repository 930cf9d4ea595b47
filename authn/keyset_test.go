package authn

import (
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// TestKeyRotationAndOutage follows the issuer's key set through rotation
// and an outage: cached keys keep working while the JWKS endpoint is down,
// an unknown key fails closed, refetches are at most one a minute, and a
// rotated key is picked up on its first use once the minute is over.
func TestKeyRotationAndOutage(t *testing.T) {
	k1, k2, k3 := newRSAKey(t, "k1"), newRSAKey(t, "k2"), newRSAKey(t, "k3")
	is := newTestIssuer(t, k1)
	r := newRig(t, oauthDoc, is.srv.URL)
	ok := func(k *testKey) (*Principal, *Failure) {
		return r.auth("", "Bearer "+sign(t, k, claimsAt(is.srv.URL, r.clock.Now(), nil)))
	}
	if _, f := ok(k1); f != nil {
		t.Fatalf("first token: %s", f.Message)
	}
	if is.metaHits.Load() != 1 || is.jwksHits.Load() != 1 {
		t.Fatalf("discovery %d, JWKS %d fetches; want 1 and 1", is.metaHits.Load(), is.jwksHits.Load())
	}
	for i := 0; i < 5; i++ {
		if _, f := ok(k1); f != nil {
			t.Fatal(f.Message)
		}
	}
	if is.jwksHits.Load() != 1 {
		t.Fatalf("a known key refetched the set: %d fetches", is.jwksHits.Load())
	}

	// Down: the cached key works; an unknown one fails closed, and only
	// the first unknown key of the minute costs a fetch.
	is.down.Store(true)
	r.clock.Advance(2 * time.Minute)
	if _, f := ok(k1); f != nil {
		t.Fatalf("cached key while the JWKS is down: %s", f.Message)
	}
	if _, f := ok(k2); f == nil || f.Status != 401 || f.Result != ResultInvalid {
		t.Fatalf("unknown key while down: %+v", f)
	}
	hits := is.jwksHits.Load()
	if hits != 2 {
		t.Fatalf("JWKS fetches = %d, want 2 (one refetch for the unknown key)", hits)
	}
	for i := 0; i < 20; i++ {
		if _, f := r.auth("", "Bearer "+sign(t, &testKey{kid: "made-up-" + strings.Repeat("x", i), alg: k3.alg, priv: k3.priv}, claimsAt(is.srv.URL, r.clock.Now(), nil))); f == nil || f.Result != ResultInvalid {
			t.Fatalf("a made-up key id: %+v", f)
		}
	}
	if is.jwksHits.Load() != hits {
		t.Fatalf("made-up key ids refetched the set: %d fetches, want %d", is.jwksHits.Load(), hits)
	}

	// Back up with rotated keys: within the minute the new key is still
	// unknown; after it, the first token with it refetches and passes.
	is.down.Store(false)
	is.publish(k1, k2)
	r.clock.Advance(30 * time.Second)
	if _, f := ok(k2); f == nil || f.Result != ResultInvalid {
		t.Fatalf("rotated key before the rate limit allows a refetch: %+v", f)
	}
	r.clock.Advance(31 * time.Second)
	if p, f := ok(k2); f != nil || p.Agent != "eng" {
		t.Fatalf("rotated key after a minute: %+v %+v", p, f)
	}
	if is.jwksHits.Load() != hits+1 {
		t.Fatalf("JWKS fetches = %d, want %d", is.jwksHits.Load(), hits+1)
	}

	// A withdrawn key stops verifying once the set is refreshed.
	is.publish(k2)
	r.clock.Advance(keysMaxAge + time.Minute)
	if _, f := ok(k1); f == nil || f.Result != ResultInvalid {
		t.Fatalf("a withdrawn key after the set was refreshed: %+v", f)
	}
}

// TestIssuerDownFromStart: with no key ever fetched, a token cannot be
// checked: 503, not 401, and retries are spaced.
func TestIssuerDownFromStart(t *testing.T) {
	k1 := newRSAKey(t, "k1")
	is := newTestIssuer(t, k1)
	is.down.Store(true)
	r := newRig(t, oauthDoc, is.srv.URL)
	tok := "Bearer " + sign(t, k1, claimsFor(is.srv.URL, nil))
	_, f := r.auth("", tok)
	if f == nil || f.Status != 503 || f.Result != ResultUnavailable || f.Header.Get("Retry-After") == "" {
		t.Fatalf("failure = %+v", f)
	}
	if r.count(t, "", ResultUnavailable) != 1 {
		t.Error("unavailable not counted")
	}
	_, _ = r.auth("", tok)
	if n := is.metaHits.Load(); n != 1 {
		t.Fatalf("metadata fetched %d times within the retry interval", n)
	}
	is.down.Store(false)
	r.clock.Advance(retryInterval)
	if _, f := r.auth("", tok); f != nil {
		t.Fatalf("after the issuer came back: %s", f.Message)
	}
}

// TestJWKSURLConfigured: jwks_url skips discovery.
func TestJWKSURLConfigured(t *testing.T) {
	k1 := newRSAKey(t, "k1")
	is := newTestIssuer(t, k1)
	doc := strings.Replace(oauthDoc, "    required_scopes: [mcp]\n", "    required_scopes: [mcp]\n    jwks_url: \"$ISSUER/keys\"\n", 1)
	r := newRig(t, doc, is.srv.URL)
	if _, f := r.auth("", "Bearer "+sign(t, k1, claimsFor(is.srv.URL, nil))); f != nil {
		t.Fatal(f.Message)
	}
	if is.metaHits.Load() != 0 {
		t.Errorf("metadata fetched %d times though jwks_url is set", is.metaHits.Load())
	}
}

// TestMetadataURLs: where an issuer's metadata is looked for
// (oauthclient.ServerMetadataURLs, which the client side uses too).
func TestMetadataURLs(t *testing.T) {
	got := strings.Join(oauthclient.ServerMetadataURLs("https://idp.example.com/tenant/a/"), " ")
	want := "https://idp.example.com/.well-known/oauth-authorization-server/tenant/a " +
		"https://idp.example.com/.well-known/openid-configuration/tenant/a " +
		"https://idp.example.com/tenant/a/.well-known/openid-configuration"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
