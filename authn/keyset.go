package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
	"github.com/mcp-proxy/mcp-proxy/internal/httpjson"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// Key set timing.
const (
	// refetchInterval is the least time between two fetches of the key set
	// once keys are cached (docs/security.md#oauth-on-the-http-listener: an unknown kid refetches at most
	// once a minute), so a flood of tokens with made-up key ids costs the
	// issuer one request a minute.
	refetchInterval = time.Minute
	// retryInterval is the least time between fetches while no key was ever
	// fetched: short, so a proxy started while the issuer was down recovers
	// quickly, yet it never hammers the issuer.
	retryInterval = 10 * time.Second
	// keysMaxAge is how long a fetched set is used without asking again; a
	// key the issuer withdrew stops verifying within it. A failed refresh
	// keeps the cached keys.
	keysMaxAge = time.Hour
)

// maxDocumentBytes bounds a metadata document or key set from the
// authorization server; real ones are a few KiB.
const maxDocumentBytes = 1 << 20

// Errors of the key set. None names a URL's secret or a response body.
var (
	// errUnavailable: no key set could be fetched and none is cached.
	errUnavailable = errors.New("the issuer's keys cannot be fetched")
	// errNoJWKS: the issuer's metadata names no jwks_uri.
	errNoJWKS = errors.New("the issuer publishes no key set")
	// errUnknownKey: the token's key id is not in the (refetched) set.
	errUnknownKey = errors.New("unknown signing key")
	// errBadSignature: no key verifies the signature.
	errBadSignature = errors.New("bad signature")
	// errInsecureJWKS: the issuer's metadata names a jwks_uri that is not
	// https (http is accepted for a loopback host only).
	errInsecureJWKS = errors.New("jwks_uri must be https:// (http:// only for a loopback host)")
)

// keySet caches the issuer's signing keys (JWKS). It fetches on demand,
// never in the background: the first token fetches, an unknown key id
// refetches at most once per refetchInterval, and a set older than
// keysMaxAge is refreshed by the next token. A fetch that fails keeps the
// cached keys working; unknown keys then fail closed.
//
// Why not a library (checked against go-oidc v3.21.0 and keyfunc v3.9.2
// with jwkset v0.11.4): go-oidc's RemoteKeySet refetches on every token
// its cached keys do not verify, unknown kid or bad signature alike, with
// no rate limit (concurrent fetches are only merged into one), so made-up
// key ids cost the issuer one request each; it never refreshes a set by
// age, reads the body unbounded and puts the body in its error texts.
// keyfunc (jwkset) rate-limits an unknown kid with a rate.Limiter whose
// Wait holds the request until the next token (up to a minute) instead of
// refusing it at once, refreshes on a background ticker, decodes the body
// unbounded, and is built for golang-jwt rather than go-jose. Neither
// finds jwks_uri in the issuer's metadata with the issuer and https checks
// (checkJWKSURI), retries sooner while no key was ever fetched, or tells
// "no key set published" (introspection may serve) from "unreachable"
// (503): docs/security.md, "OAuth on the HTTP listener" and "The
// issuer's signing keys", documents all of these.
type keySet struct {
	client  *http.Client
	issuer  string
	jwksURL string // listen.auth.jwks_url; "" means discover it
	now     func() time.Time
	log     zerolog.Logger

	fetchMu sync.Mutex // one fetch at a time

	mu        sync.RWMutex
	keys      []jose.JSONWebKey
	loaded    bool      // keys were fetched at least once
	fetched   time.Time // last successful fetch
	attempted time.Time // last fetch attempt
	lastErr   error     // errUnavailable or errNoJWKS while !loaded
	location  string    // the key set URL, once known

	// gen counts the successful fetches: verified tokens are trusted only
	// with the set they were checked against (verifiedCache).
	gen atomic.Uint64
}

// generation is the number of the key set now cached (0: none yet).
func (s *keySet) generation() uint64 { return s.gen.Load() }

// lookup returns the cached keys that may have signed a token with key id
// kid and algorithm alg (all keys usable with alg when kid is ""). force
// asks for a refetch even if such keys are cached (still rate-limited).
func (s *keySet) lookup(ctx context.Context, kid, alg string, force bool) ([]jose.JSONWebKey, error) {
	s.mu.RLock()
	cand := candidates(s.keys, kid, alg)
	loaded, stale := s.loaded, s.now().Sub(s.fetched) > keysMaxAge
	s.mu.RUnlock()
	switch {
	case !loaded || len(cand) == 0 || force:
		s.refresh(ctx, true)
	case stale:
		s.refresh(ctx, false)
	default:
		return cand, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.loaded {
		if s.lastErr == nil {
			return nil, errUnavailable
		}
		return nil, s.lastErr
	}
	if cand = candidates(s.keys, kid, alg); len(cand) == 0 {
		return nil, errUnknownKey
	}
	return cand, nil
}

// candidates filters keys by key id and algorithm.
func candidates(keys []jose.JSONWebKey, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) {
			out = append(out, k)
		}
	}
	return out
}

// refresh fetches the key set unless the last attempt is too recent. wait
// false gives up at once when another request is already fetching (the
// caller has usable keys).
func (s *keySet) refresh(ctx context.Context, wait bool) {
	if wait {
		s.fetchMu.Lock()
	} else if !s.fetchMu.TryLock() {
		return
	}
	defer s.fetchMu.Unlock()
	now := s.now()
	s.mu.Lock()
	gap := retryInterval
	if s.loaded {
		gap = refetchInterval
	}
	if !s.attempted.IsZero() && now.Sub(s.attempted) < gap {
		s.mu.Unlock()
		return
	}
	s.attempted = now
	location := s.location
	s.mu.Unlock()

	// The fetch serves every waiting request: a client that goes away must
	// not cancel it (and spend the attempt).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	var err error
	if location == "" {
		location, err = s.locate(ctx)
	}
	var keys []jose.JSONWebKey
	if err == nil {
		keys, err = fetchKeySet(ctx, s.client, location)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.location = location
	if err != nil {
		s.log.Warn().Err(err).Str("issuer", s.issuer).Bool("cached_keys", s.loaded).
			Msg("cannot fetch the OAuth issuer's signing keys")
		if !s.loaded {
			s.lastErr = errUnavailable
			if errors.Is(err, errNoJWKS) {
				s.lastErr = errNoJWKS
			}
		}
		return
	}
	s.keys, s.loaded, s.fetched = keys, true, now
	s.gen.Add(1)
}

// locate returns the key set URL: jwks_url, else the jwks_uri of the
// issuer's metadata.
func (s *keySet) locate(ctx context.Context) (string, error) {
	if s.jwksURL != "" {
		return s.jwksURL, nil
	}
	return discoverJWKS(ctx, s.client, s.issuer)
}

// discoverJWKS reads the issuer's metadata and returns its jwks_uri. The
// metadata must name the same issuer (RFC 8414 §3.3), or an attacker able
// to serve one well-known path could hand out keys for another issuer.
func discoverJWKS(ctx context.Context, client *http.Client, issuer string) (string, error) {
	var firstErr error
	for _, u := range oauthclient.ServerMetadataURLs(issuer) {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		status, err := getJSON(ctx, client, u, &meta)
		switch {
		case err == nil && !oauthclient.SameIssuer(meta.Issuer, issuer):
			err = fmt.Errorf("metadata at %s names another issuer", u)
		case err == nil && meta.JWKSURI == "":
			return "", errNoJWKS
		case err == nil:
			if err := checkJWKSURI(meta.JWKSURI); err != nil {
				return "", fmt.Errorf("issuer %s: metadata at %s: %w", issuer, u, err)
			}
			return meta.JWKSURI, nil
		case status >= 400 && status < 500:
			continue // not at this place; try the next
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("no authorization server metadata for issuer %s", issuer)
	}
	return "", firstErr
}

// checkJWKSURI applies to a discovered jwks_uri the rule the configuration
// applies to listen.auth.jwks_url: https, or http for a loopback host only.
// Keys fetched over plain HTTP from another host could be swapped on the
// way, and with them every token the proxy accepts. The error names the
// URI's scheme and host only: its path or query may carry a secret.
func checkJWKSURI(raw string) error {
	p, err := url.Parse(raw)
	if err != nil || p.Host == "" {
		return errors.New("jwks_uri is not an absolute http(s) URL")
	}
	switch strings.ToLower(p.Scheme) {
	case "https":
		return nil
	case "http":
		if httpguard.IsLoopback(p.Hostname()) {
			return nil
		}
		return fmt.Errorf("%w, got http://%s", errInsecureJWKS, p.Host)
	}
	return errors.New("jwks_uri is not an absolute http(s) URL")
}

// fetchKeySet fetches a JWKS and keeps its public signature keys of types
// the allowed algorithms use (RSA, EC, OKP). Keys of other types, keys for
// encryption and symmetric keys are skipped, as RFC 7517 §5 lets a reader
// skip what it does not understand; a private key is reduced to its public
// half.
func fetchKeySet(ctx context.Context, client *http.Client, location string) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if _, err := getJSON(ctx, client, location, &doc); err != nil {
		return nil, err
	}
	var out []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if json.Unmarshal(raw, &k) != nil || (k.Use != "" && k.Use != "sig") {
			continue
		}
		pub := k.Public()
		switch pub.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			out = append(out, pub)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("key set at %s holds no usable signature key", location)
	}
	return out, nil
}

// getJSON GETs url and decodes its JSON object (at most maxDocumentBytes)
// into dst. status is the HTTP status, 0 when no response came. The error
// names the URL and status, never the body.
func getJSON(ctx context.Context, client *http.Client, url string, dst any) (status int, err error) {
	status, err = httpjson.Get(ctx, client, url, httpjson.Limits{Body: maxDocumentBytes, Drain: maxDocumentBytes}, dst)
	if err != nil {
		return status, fmt.Errorf("GET %s: %w", url, err)
	}
	return status, nil
}
