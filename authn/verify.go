package authn

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// clockSkew is how far the proxy's clock may disagree with the issuer's
// when exp, nbf and iat are checked (docs/security.md#oauth-on-the-http-listener).
const clockSkew = 60 * time.Second

// fetchTimeout bounds one request to the authorization server (metadata,
// JWKS, introspection): a request waiting on it waits no longer.
const fetchTimeout = 10 * time.Second

// allowedAlgs are the JWS algorithms an access token may be signed with:
// asymmetric ones only. "none" and the HMAC family are refused before any
// key is looked at, so a token "signed" with the issuer's public key as an
// HMAC secret never verifies.
var allowedAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// verifier checks access tokens of one issuer.
type verifier struct {
	issuer   string
	required []string // required_scopes
	keys     *keySet
	intro    *introspector // nil without listen.auth.introspection
	verified verifiedCache
	now      func() time.Time
	log      zerolog.Logger
}

// tokenInfo is what a valid access token says.
type tokenInfo struct {
	claims   map[string]json.RawMessage
	subject  string
	clientID string
	scopes   []string
	expiry   time.Time
}

func newVerifier(cfg *config.ListenAuth, opts Options) *verifier {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: fetchTimeout}
	}
	v := &verifier{
		issuer:   cfg.Issuer,
		required: cfg.RequiredScopes,
		now:      now,
		log:      opts.Log,
		keys:     &keySet{client: client, issuer: cfg.Issuer, jwksURL: cfg.JWKSURL, now: now, log: opts.Log},
	}
	if in := cfg.Introspection; in != nil {
		v.intro = &introspector{url: in.URL, clientID: in.ClientID, secret: in.ClientSecret,
			client: client, now: now, log: opts.Log, cache: map[[32]byte]introEntry{}}
	}
	return v
}

// verify checks tok for an endpoint whose token must name one of
// audiences. It returns the token's information, or the result that
// refuses it. A token shaped like a JWT is checked locally; any other
// token (and a JWT when the issuer publishes no keys) goes to
// introspection when it is configured.
func (v *verifier) verify(ctx context.Context, tok string, audiences []string) (*tokenInfo, string) {
	if looksLikeJWT(tok) {
		info, res, err := v.verifyJWT(ctx, tok, audiences)
		if !errors.Is(err, errNoJWKS) || v.intro == nil {
			return info, res
		}
	}
	if v.intro == nil {
		return nil, ResultInvalid
	}
	payload, res := v.intro.check(ctx, tok)
	if res != "" {
		return nil, res
	}
	return v.checkClaims(payload, audiences, false)
}

// looksLikeJWT reports a JWS compact serialization: three non-empty
// base64url segments, the first a JSON object.
func looksLikeJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	return len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "" &&
		strings.HasPrefix(parts[0], "eyJ")
}

// verifyJWT checks a JWT access token's algorithm, signature and claims.
// err is errNoJWKS when the issuer publishes no key set.
func (v *verifier) verifyJWT(ctx context.Context, tok string, audiences []string) (*tokenInfo, string, error) {
	jws, err := jose.ParseSignedCompact(tok, allowedAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, ResultInvalid, nil
	}
	h := jws.Signatures[0].Header
	payload, err := v.verifySignature(ctx, jws, h.KeyID, h.Algorithm)
	switch {
	case errors.Is(err, errNoJWKS):
		return nil, ResultInvalid, err
	case errors.Is(err, errUnavailable):
		return nil, ResultUnavailable, nil
	case err != nil:
		return nil, ResultInvalid, nil
	}
	info, res := v.checkClaims(payload, audiences, true)
	return info, res, nil
}

// verifySignature finds the key that signed jws among the issuer's keys.
// A key id not in the cached set, or a token without key id that no cached
// key verifies, refetches the set (rate-limited) and tries once more.
func (v *verifier) verifySignature(ctx context.Context, jws *jose.JSONWebSignature, kid, alg string) ([]byte, error) {
	for attempt := 0; attempt < 2; attempt++ {
		keys, err := v.keys.lookup(ctx, kid, alg, attempt > 0)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if payload, err := jws.Verify(k.Key); err == nil {
				return payload, nil
			}
		}
		if kid != "" {
			return nil, errBadSignature // a known key that does not verify: forged
		}
	}
	return nil, errBadSignature
}

// checkClaims checks the registered claims of a verified JWT payload or an
// active introspection response: iss, exp (required for a JWT), nbf and
// iat with clockSkew, and aud (required for a JWT; an introspection
// response without aud was vouched for by the issuer itself).
func (v *verifier) checkClaims(payload []byte, audiences []string, fromJWT bool) (*tokenInfo, string) {
	var claims map[string]json.RawMessage
	var std jwt.Claims
	if json.Unmarshal(payload, &claims) != nil || json.Unmarshal(payload, &std) != nil {
		return nil, ResultInvalid
	}
	if _, has := claims["iss"]; (fromJWT || has) && !oauthclient.SameIssuer(std.Issuer, v.issuer) {
		return nil, ResultInvalid
	}
	now := v.now()
	if std.Expiry == nil && fromJWT {
		return nil, ResultInvalid
	}
	if std.Expiry != nil && now.After(std.Expiry.Time().Add(clockSkew)) {
		return nil, ResultExpired
	}
	if std.NotBefore != nil && now.Add(clockSkew).Before(std.NotBefore.Time()) {
		return nil, ResultInvalid
	}
	if std.IssuedAt != nil && now.Add(clockSkew).Before(std.IssuedAt.Time()) {
		return nil, ResultInvalid
	}
	if _, has := claims["aud"]; (fromJWT || has) && !audienceMatches(std.Audience, audiences) {
		return nil, ResultWrongAudience
	}
	info := &tokenInfo{claims: claims, subject: std.Subject, scopes: tokenScopes(claims)}
	if info.clientID = stringClaim(claims, "azp"); info.clientID == "" {
		info.clientID = stringClaim(claims, "client_id")
	}
	if std.Expiry != nil {
		info.expiry = std.Expiry.Time()
	}
	return info, ""
}

// missingScopes returns the required scopes that scopes lacks.
func (v *verifier) missingScopes(scopes []string) []string {
	var missing []string
	for _, r := range v.required {
		found := false
		for _, s := range scopes {
			found = found || s == r
		}
		if !found {
			missing = append(missing, r)
		}
	}
	return missing
}

// audienceMatches reports whether aud names one of accepted, exactly or
// differing only by a trailing "/" (oauthex.MatchesResource). An empty aud
// value names nothing, not even an accepted "/".
func audienceMatches(aud jwt.Audience, accepted []string) bool {
	for _, a := range aud {
		if a != "" && slices.ContainsFunc(accepted, func(w string) bool { return oauthex.MatchesResource([]string{a}, w) }) {
			return true
		}
	}
	return false
}
