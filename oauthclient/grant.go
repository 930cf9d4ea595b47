package oauthclient

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/mcp-proxy/mcp-proxy/internal/atomicfile"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Token endpoint authentication methods (RFC 7591 §2).
const (
	AuthNone          = "none"
	AuthSecretBasic   = "client_secret_basic"
	AuthSecretPost    = "client_secret_post"
	AuthPrivateKeyJWT = "private_key_jwt"
)

// assertionLifetime is how long a private_key_jwt client assertion is
// valid: one token request.
const assertionLifetime = 5 * time.Minute

// maxKeyFile bounds a PEM private key file.
const maxKeyFile = 64 << 10

// identity is how the proxy authenticates at a token endpoint.
type identity struct {
	clientID, secret string
	method           string // one of the Auth* constants
	key              *signingKey
}

// authStyle maps the method to x/oauth2's AuthStyle. "none" and
// private_key_jwt send the client id in the body and no secret.
func (id identity) authStyle() oauth2.AuthStyle {
	if id.method == AuthSecretBasic {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// secretSent is the client secret x/oauth2 should send, "" for the methods
// that send none.
func (id identity) secretSent() string {
	if id.method == AuthSecretBasic || id.method == AuthSecretPost {
		return id.secret
	}
	return ""
}

// tokenCtx carries hc to x/oauth2, which takes its HTTP client from ctx.
func tokenCtx(ctx context.Context, hc *http.Client) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, hc)
}

// exchangeCode redeems an authorization code (x/oauth2 Exchange with the
// PKCE verifier and the RFC 8707 resource).
func exchangeCode(ctx context.Context, hc *http.Client, md *Metadata, id identity, redirect, code, verifier string) (*oauth2.Token, error) {
	cfg := &oauth2.Config{
		ClientID: id.clientID, ClientSecret: id.secretSent(), RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: md.AuthorizationEndpoint, TokenURL: md.TokenEndpoint, AuthStyle: id.authStyle()},
	}
	tok, err := cfg.Exchange(tokenCtx(ctx, hc), code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", md.Resource))
	return tok, tokenErr(ctx, md.TokenEndpoint, err)
}

// endpointGrant runs a grant other than the authorization code at
// tokenURL through x/oauth2's clientcredentials package, whose
// EndpointParams may set grant_type and carry resource and the client
// assertion.
func endpointGrant(ctx context.Context, hc *http.Client, tokenURL, audience string, id identity, scopes []string, params url.Values) (*oauth2.Token, error) {
	if id.method == AuthPrivateKeyJWT {
		assertion, err := id.key.assertion(id.clientID, audience)
		if err != nil {
			return nil, err
		}
		params.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		params.Set("client_assertion", assertion)
		params.Set("client_id", id.clientID)
	}
	cfg := &clientcredentials.Config{
		ClientID: id.clientID, ClientSecret: id.secretSent(), TokenURL: tokenURL,
		Scopes: scopes, EndpointParams: params, AuthStyle: id.authStyle(),
	}
	if id.method == AuthPrivateKeyJWT {
		cfg.ClientID = "" // sent in params, never as a Basic user
	}
	tok, err := cfg.Token(tokenCtx(ctx, hc))
	return tok, tokenErr(ctx, tokenURL, err)
}

// clientCredentials fetches a token with the client_credentials grant.
func clientCredentials(ctx context.Context, hc *http.Client, e *Entry, id identity, scopes []string) (*oauth2.Token, error) {
	return endpointGrant(ctx, hc, e.TokenEndpoint, e.Issuer, id, scopes, url.Values{"resource": {e.resource()}})
}

// refreshGrant trades e's refresh token for new tokens. x/oauth2's
// Config.TokenSource cannot add the resource parameter, so the refresh
// goes through endpointGrant with grant_type refresh_token; a response
// without a new refresh token keeps the old one (x/oauth2 does that).
func refreshGrant(ctx context.Context, hc *http.Client, e *Entry, id identity) (*oauth2.Token, error) {
	return endpointGrant(ctx, hc, e.TokenEndpoint, e.Issuer, id, nil, url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {e.RefreshToken},
		"resource":      {e.resource()},
	})
}

// tokenErr turns x/oauth2's errors into ones that hold no response body
// (which may echo credentials) and say what happened.
func tokenErr(ctx context.Context, tokenURL string, err error) error {
	if err == nil {
		return nil
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		te := &TokenError{Code: cut(re.ErrorCode, 100), Description: cut(re.ErrorDescription, 200)}
		if re.Response != nil {
			te.Status = re.Response.StatusCode
		}
		return te
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("token endpoint %s did not answer in time", redactURL(tokenURL))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("token endpoint %s did not answer in time", redactURL(tokenURL))
		}
		return fmt.Errorf("token endpoint %s: %w", redactURL(tokenURL), ue.Err)
	}
	// What is left comes after an answer of the endpoint: x/oauth2 could not
	// read or parse its body, or found no access_token in it. Its texts may
	// quote the body, so none is shown.
	return fmt.Errorf("token endpoint %s %w", redactURL(tokenURL), ErrNoAccessToken)
}

// grantedScopes are the scopes of a token response, or requested when it
// names none (RFC 6749 §5.1: then they are the ones requested).
func grantedScopes(tok *oauth2.Token, requested []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && strings.TrimSpace(s) != "" {
		return splitScopes(s)
	}
	return requested
}

// signingKey is a private key for private_key_jwt, with its JWS algorithm.
type signingKey struct {
	key crypto.Signer
	alg jose.SignatureAlgorithm
}

// loadSigningKey reads a PEM private key (PKCS #8, PKCS #1 RSA or SEC 1 EC)
// and settles the algorithm: alg when given (it must suit the key), else
// RS256, ES256/384/512 by curve, or EdDSA.
func loadSigningKey(path, alg string) (*signingKey, error) {
	data, _, err := atomicfile.ReadAtMost(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("private_key_file: %w", err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("private_key_file %s is larger than %d bytes", path, maxKeyFile)
	}
	return parseSigningKey(data, alg)
}

// parseSigningKey parses the first PEM private key block of data. Its
// errors never quote the key.
func parseSigningKey(data []byte, alg string) (*signingKey, error) {
	var block *pem.Block
	for {
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("private_key_file holds no PEM private key")
		}
		if strings.Contains(block.Type, "PRIVATE KEY") {
			break
		}
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, errors.New("private_key_file: the PEM block is not a valid private key")
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("private_key_file: unsupported key type")
	}
	want, err := algFor(signer, alg)
	if err != nil {
		return nil, err
	}
	return &signingKey{key: signer, alg: want}, nil
}

// algFor checks alg against the key, or picks the key's usual algorithm.
func algFor(key crypto.Signer, alg string) (jose.SignatureAlgorithm, error) {
	var allowed []jose.SignatureAlgorithm
	switch k := key.(type) {
	case *rsa.PrivateKey:
		allowed = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512}
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			allowed = []jose.SignatureAlgorithm{jose.ES256}
		case elliptic.P384():
			allowed = []jose.SignatureAlgorithm{jose.ES384}
		case elliptic.P521():
			allowed = []jose.SignatureAlgorithm{jose.ES512}
		}
	case ed25519.PrivateKey:
		allowed = []jose.SignatureAlgorithm{jose.EdDSA}
	}
	if len(allowed) == 0 {
		return "", errors.New("private_key_file: unsupported key type or curve")
	}
	if alg == "" {
		return allowed[0], nil
	}
	for _, a := range allowed {
		if string(a) == alg {
			return a, nil
		}
	}
	return "", fmt.Errorf("alg %s does not suit the key in private_key_file (it takes %s)", alg, allowed[0])
}

// assertion signs an RFC 7523 client assertion: iss and sub the client id,
// aud the authorization server's issuer, a fresh jti, five minutes of life.
func (k *signingKey) assertion(clientID, audience string) (string, error) {
	if k == nil {
		return "", errors.New("private_key_jwt needs private_key_file")
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("client assertion: %w", err)
	}
	now := time.Now()
	claims := jwt.Claims{
		Issuer: clientID, Subject: clientID, Audience: jwt.Audience{audience},
		ID:       rand.Text(),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-30 * time.Second)),
		Expiry: jwt.NewNumericDate(now.Add(assertionLifetime)),
	}
	s, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("client assertion: %w", err)
	}
	return s, nil
}
