package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Token issuer of the feature scenarios.
const (
	// issuerAudience is the listen.auth.audience of a proxy with featOAuth
	// and the aud of every token (the proxy's default audience names its
	// URL, which a proxy on port 0 learns only once it listens).
	issuerAudience = "mcp-proxy-loadtest"
	// issuerKeyID names the one signing key.
	issuerKeyID = "loadtest-1"
	// tokenLifetime outlives any run.
	tokenLifetime = 24 * time.Hour
	// issuerShutdown bounds closing the issuer's server.
	issuerShutdown = 5 * time.Second
)

// issuer is a minimal OAuth authorization server on a loopback port: its
// metadata (RFC 8414 and OpenID discovery) names its JWKS, and it signs
// ES256 access tokens itself. It runs in the load test's process: the proxy
// fetches its keys once and caches them, so it costs the measured sides
// nothing after the first request.
type issuer struct {
	url string
	key *ecdsa.PrivateKey
	srv *http.Server
	ln  net.Listener
}

// startIssuer starts the issuer; close stops it.
func startIssuer() (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("issuer key: %w", err)
	}
	ln, err := net.Listen("tcp", loopback+":0")
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	is := &issuer{url: "http://" + ln.Addr().String(), key: key, ln: ln}
	meta, err := json.Marshal(map[string]any{
		"issuer":                                is.url,
		"jwks_uri":                              is.url + "/jwks",
		"authorization_endpoint":                is.url + "/authorize",
		"token_endpoint":                        is.url + "/token",
		"response_types_supported":              []string{"code"},
		"code_challenge_methods_supported":      []string{"S256"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"subject_types_supported":               []string{"public"},
	})
	if err != nil {
		return nil, errors.Join(err, ln.Close())
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &key.PublicKey, KeyID: issuerKeyID, Algorithm: string(jose.ES256), Use: "sig"},
	}})
	if err != nil {
		return nil, errors.Join(err, ln.Close())
	}
	serve := func(body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/oauth-authorization-server", serve(meta))
	mux.Handle("GET /.well-known/openid-configuration", serve(meta))
	mux.Handle("GET /jwks", serve(jwks))
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: issuerShutdown}
	go func() { _ = is.srv.Serve(ln) }() // Serve ends when close shuts the server down
	return is, nil
}

// token signs an access token for subject with scope mcp.
func (is *issuer) token(subject string) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader(jose.HeaderKey("kid"), issuerKeyID))
	if err != nil {
		return "", fmt.Errorf("issuer: %w", err)
	}
	now := time.Now()
	claims := jwt.Claims{
		Issuer:   is.url,
		Subject:  subject,
		Audience: jwt.Audience{issuerAudience},
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(tokenLifetime)),
		ID:       rand.Text(),
	}
	tok, err := jwt.Signed(sig).Claims(claims).Claims(map[string]any{"scope": "mcp", "client_id": "loadtest"}).Serialize()
	if err != nil {
		return "", fmt.Errorf("issuer: %w", err)
	}
	return tok, nil
}

func (is *issuer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), issuerShutdown)
	defer cancel()
	return is.srv.Shutdown(ctx)
}
