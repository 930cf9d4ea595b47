package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// testIssuer is an authorization server on a loopback port that publishes
// RFC 8414 metadata and a JWKS, signs tokens with its keys, and can be
// taken down or rotate keys. The end-to-end tests use a real OpenID
// provider; this one lets the unit tests forge every attack precisely.
type testIssuer struct {
	t    testing.TB
	srv  *httptest.Server
	down atomic.Bool

	jwksHits atomic.Int32
	metaHits atomic.Int32

	mu        sync.Mutex
	published []*testKey
}

// testKey is one signing key.
type testKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newRSAKey(t testing.TB, kid string) *testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: jose.RS256, priv: k}
}

func newECKey(t testing.TB, kid string) *testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: jose.ES256, priv: k}
}

func newTestIssuer(t testing.TB, keys ...*testKey) *testIssuer {
	is := &testIssuer{t: t, published: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		is.metaHits.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/keys",
			"authorization_endpoint": is.srv.URL + "/authorize", "token_endpoint": is.srv.URL + "/token",
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		is.jwksHits.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range is.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// publish replaces the published keys (rotation).
func (is *testIssuer) publish(keys ...*testKey) {
	is.mu.Lock()
	is.published = keys
	is.mu.Unlock()
}

// sign returns a compact JWS of claims signed by k.
func sign(t testing.TB, k *testKey, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if k.kid != "" {
		opts = opts.WithHeader("kid", k.kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rig is an Authenticator under test with its metrics.
type rig struct {
	a     *Authenticator
	reg   *prometheus.Registry
	clock *fakeClock
}

// newRig parses doc (with $ISSUER replaced) and builds its Authenticator.
func newRig(t testing.TB, doc, issuer string) *rig {
	t.Helper()
	cfg, reg, m := parseWithMetrics(t, strings.ReplaceAll(doc, "$ISSUER", issuer))
	clock := &fakeClock{now: time.Now()}
	return &rig{
		a:     New(cfg, Options{Metrics: m, Log: zerolog.Nop(), Now: clock.Now}),
		reg:   reg,
		clock: clock,
	}
}

// testSecrets are the variables the test configs reference.
var testSecrets = map[string]string{"OPS_TOKEN": "ops-static-token-1", "OPS_TOKEN2": "ops-static-token-2", "SECRET": "rs-secret"}

// parseWithMetrics parses a config (variables from testSecrets) and makes
// metrics on a fresh registry.
func parseWithMetrics(t testing.TB, doc string) (*config.Config, *prometheus.Registry, *metrics.Metrics) {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), func(k string) (string, bool) {
		if k == "HOME" {
			return "/nonexistent-home", true // default state dirs, never written here
		}
		v, ok := testSecrets[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, reg, m
}

// auth runs Authenticate for a request to pathAgent's endpoint with the
// given Authorization header ("" for none).
func (r *rig) auth(pathAgent, authorization string) (*Principal, *Failure) {
	req := httptest.NewRequest(http.MethodPost, "http://proxy.test/mcp", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return r.a.Authenticate(req, pathAgent)
}

// count reads mcp_proxy_auth_total{agent,result}.
func (r *rig) count(t *testing.T, agent, result string) float64 {
	t.Helper()
	return authCount(r.reg, agent, result)
}

// authCount reads mcp_proxy_auth_total{agent,result} from reg; 0 when the
// series does not exist.
func authCount(reg *prometheus.Registry, agent, result string) float64 {
	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "mcp_proxy_auth_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["agent"] == agent && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
