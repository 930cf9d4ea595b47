package authn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/rs/zerolog"
)

// Introspection cache bounds.
const (
	// maxCachedTokens bounds the introspection cache. With responses of at
	// most maxIntrospectionBytes it stays under 64 MiB even when full; real
	// entries are under 2 KiB.
	maxCachedTokens = 4096
	// maxIntrospectionBytes bounds one introspection response.
	maxIntrospectionBytes = 16 << 10
	// introspectionTTL is how long an active token without exp is trusted
	// before it is introspected again.
	introspectionTTL = 5 * time.Minute
	// inactiveTTL is how long an inactive answer is kept: a client retrying
	// a revoked token does not reach the issuer on every request.
	inactiveTTL = 30 * time.Second
)

// introspector asks an RFC 7662 endpoint about opaque tokens and caches the
// answers until the token expires. The cache is keyed by the token's
// SHA-256, so it holds no token.
type introspector struct {
	url, clientID, secret string
	client                *http.Client
	now                   func() time.Time
	log                   zerolog.Logger

	mu    sync.Mutex
	cache map[[32]byte]introEntry
}

// introEntry is one cached answer: the active response's body, or nil for
// an inactive token.
type introEntry struct {
	body  []byte
	until time.Time
}

// check returns the response of an active token (its claims), or the
// result refusing it: invalid for an inactive token, unavailable when the
// endpoint cannot answer (not cached).
func (in *introspector) check(ctx context.Context, tok string) ([]byte, string) {
	key := sha256.Sum256([]byte(tok))
	now := in.now()
	in.mu.Lock()
	e, ok := in.cache[key]
	in.mu.Unlock()
	if ok && now.Before(e.until) {
		if e.body == nil {
			return nil, ResultInvalid
		}
		return e.body, ""
	}
	body, active, exp, err := in.ask(ctx, tok)
	if err != nil {
		in.log.Warn().Err(err).Msg("token introspection failed")
		return nil, ResultUnavailable
	}
	until := now.Add(inactiveTTL)
	if active {
		until = now.Add(introspectionTTL)
		if !exp.IsZero() {
			until = exp
		}
	} else {
		body = nil
	}
	in.store(key, introEntry{body: body, until: until}, now)
	if !active {
		return nil, ResultInvalid
	}
	return body, ""
}

// store adds an entry, first dropping expired ones and, if the cache is
// still full, arbitrary ones.
func (in *introspector) store(key [32]byte, e introEntry, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.cache) >= maxCachedTokens {
		for k, old := range in.cache {
			if !now.Before(old.until) {
				delete(in.cache, k)
			}
		}
		for k := range in.cache {
			if len(in.cache) < maxCachedTokens {
				break
			}
			delete(in.cache, k)
		}
	}
	in.cache[key] = e
}

// ask posts the token to the introspection endpoint, authenticated as the
// configured client (client_secret_basic, RFC 6749 §2.3.1 encoding).
func (in *introspector) ask(ctx context.Context, tok string) (body []byte, active bool, exp time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	form := url.Values{"token": {tok}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.url, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, false, exp, fmt.Errorf("introspection request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(in.clientID), url.QueryEscape(in.secret))
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, false, exp, fmt.Errorf("POST %s: %w", in.url, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxIntrospectionBytes+1))
	switch {
	case err != nil:
		return nil, false, exp, fmt.Errorf("POST %s: %w", in.url, err)
	case resp.StatusCode != http.StatusOK:
		return nil, false, exp, fmt.Errorf("POST %s: status %d", in.url, resp.StatusCode)
	case len(body) > maxIntrospectionBytes:
		return nil, false, exp, fmt.Errorf("POST %s: response larger than %d bytes", in.url, maxIntrospectionBytes)
	}
	var r struct {
		Active json.RawMessage  `json:"active"`
		Exp    *jwt.NumericDate `json:"exp"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, false, exp, fmt.Errorf("POST %s: the response is not an introspection response", in.url)
	}
	if r.Exp != nil {
		exp = r.Exp.Time()
	}
	return body, bytes.Equal(bytes.TrimSpace(r.Active), []byte("true")), exp, nil
}
