// Package testoidc runs a real OpenID provider in-process for tests of the
// HTTP listener's OAuth (docs/security.md#oauth-on-the-http-listener), and plays the MCP client's side of its
// login: the official Go SDK client's OAuth flow (Connect), or a plain
// authorization code + PKCE flow for a chosen resource (Provider.Token).
//
// The provider is zitadel/oidc's op package with its example in-memory
// storage and login page, on a loopback port, adjusted the way a real
// deployment configures its provider: the MCP clients are public clients
// (PKCE, loopback redirect) whose access tokens are JWTs (JWTClientID) or
// opaque (OpaqueClientID); a token's audience is the RFC 8707 resource the
// client asked for plus ResourceServerID (so that the proxy may introspect
// it); access tokens carry the user's groups and the granted scopes. The
// only scope beyond the OpenID ones is "mcp".
//
// Users (password "<name>-pw") and their groups: alice [eng], bob [sales],
// carol [] and dave [eng].
package testoidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Client ids and redirect URI of the provider, and the proxy's credentials
// at its introspection endpoint.
const (
	// JWTClientID is a public client whose access tokens are JWTs.
	JWTClientID = "mcp-client"
	// OpaqueClientID is a public client whose access tokens are opaque.
	OpaqueClientID = "mcp-client-opaque"
	// RedirectURI is the clients' redirect URI; it is never contacted.
	RedirectURI = "http://127.0.0.1/callback"
	// ResourceServerID and ResourceServerSecret authenticate the proxy at
	// the introspection endpoint; ResourceServerID is in every audience
	// the provider issues for a resource.
	ResourceServerID     = "mcp-proxy"
	ResourceServerSecret = "rs-secret-0123"
	// Scope is the one non-OpenID scope the clients may ask for.
	Scope = "mcp"
)

// users are the provider's accounts and their groups.
var users = map[string]struct {
	password string
	groups   []string
}{
	"alice": {"alice-pw", []string{"eng"}},
	"bob":   {"bob-pw", []string{"sales"}},
	"carol": {"carol-pw", nil},
	"dave":  {"dave-pw", []string{"eng"}},
}

// Provider is a running OpenID provider. Its endpoints are those of its
// discovery document.
type Provider struct {
	// Issuer is http://127.0.0.1:<port>, without a trailing slash.
	Issuer                string
	AuthorizationEndpoint string
	TokenEndpoint         string
	IntrospectionEndpoint string
}

// discoveryTimeout bounds the read of the provider's own discovery
// document at Start (a loopback request; generous for a busy machine).
const discoveryTimeout = 10 * time.Second

var quietSlog sync.Once

// Start runs a provider on a loopback port until the test ends. It sets
// slog's default logger to discard, once per process: the example's
// request log goes there.
func Start(t testing.TB) *Provider {
	t.Helper()
	quietSlog.Do(func() { slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) })
	var router http.Handler
	// RFC 8707: the provider scopes the token to the resource the client
	// names on the authorization request.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if res := r.URL.Query().Get("resource"); res != "" {
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
		}
		router.ServeHTTP(w, r)
	}))
	p := &Provider{Issuer: "http://" + srv.Listener.Addr().String()}
	st := &opStorage{
		Storage:   storage.NewStorageWithClients(userStore{}, map[string]*storage.Client{}),
		audiences: map[string][]string{},
	}
	router = exampleop.SetupServer(p.Issuer, st, nil, false)
	srv.Start()
	t.Cleanup(srv.Close)
	if err := p.discover(); err != nil {
		t.Fatal(err)
	}
	return p
}

// discover reads the endpoints from the discovery document.
func (p *Provider) discover() error {
	c := &http.Client{Timeout: discoveryTimeout}
	resp, err := c.Get(p.Issuer + oidc.DiscoveryEndpoint)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	defer resp.Body.Close()
	var doc struct {
		Authorization string `json:"authorization_endpoint"`
		Token         string `json:"token_endpoint"`
		Introspection string `json:"introspection_endpoint"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	if resp.StatusCode != http.StatusOK || doc.Authorization == "" || doc.Token == "" || doc.Introspection == "" {
		return fmt.Errorf("discovery: HTTP %d, endpoints %+v", resp.StatusCode, doc)
	}
	p.AuthorizationEndpoint, p.TokenEndpoint, p.IntrospectionEndpoint = doc.Authorization, doc.Token, doc.Introspection
	return nil
}

// userStore implements storage.UserStore for users.
type userStore struct{}

func (userStore) GetUserByID(id string) *storage.User { return userStore{}.GetUserByUsername(id) }
func (userStore) ExampleClientID() string             { return "service" }
func (userStore) GetUserByUsername(name string) *storage.User {
	u, ok := users[name]
	if !ok {
		return nil
	}
	return &storage.User{ID: name, Username: name, Password: u.password, FirstName: name, LastName: "Test",
		Email: name + "@example.com", EmailVerified: true, PreferredLanguage: language.English}
}

// opStorage is the example storage with the adjustments of the package
// doc.
type opStorage struct {
	*storage.Storage
	mu        sync.Mutex
	audiences map[string][]string // auth request id -> aud
}

// resourceKey carries the authorize request's resource parameter.
type resourceKey struct{}

// audRequest is an auth request whose audience is the requested resource
// (plus the proxy's id, so that it may introspect the opaque tokens).
type audRequest struct {
	*storage.AuthRequest
	aud []string
}

func (r audRequest) GetAudience() []string { return r.aud }

func (s *opStorage) wrap(req op.AuthRequest) op.AuthRequest {
	ar, ok := req.(*storage.AuthRequest)
	if !ok {
		return req
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return audRequest{AuthRequest: ar, aud: s.audiences[ar.ID]}
}

func (s *opStorage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	ar, err := s.Storage.CreateAuthRequest(ctx, req, userID)
	if err != nil {
		return nil, err
	}
	aud := []string{req.ClientID}
	if res, _ := ctx.Value(resourceKey{}).(string); res != "" {
		aud = []string{res, ResourceServerID}
	}
	s.mu.Lock()
	s.audiences[ar.GetID()] = aud
	s.mu.Unlock()
	return s.wrap(ar), nil
}

func (s *opStorage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	ar, err := s.Storage.AuthRequestByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.wrap(ar), nil
}

func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	ar, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return s.wrap(ar), nil
}

func (s *opStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	switch id {
	case JWTClientID:
		return publicClient{id: id, tokenType: op.AccessTokenTypeJWT}, nil
	case OpaqueClientID:
		return publicClient{id: id, tokenType: op.AccessTokenTypeBearer}, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

func (s *opStorage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	if id == ResourceServerID && secret == ResourceServerSecret {
		return nil
	}
	return errors.New("invalid client")
}

// GetPrivateClaimsFromScopes puts the user's groups and the granted scopes
// (zitadel's JWT access tokens carry no scope claim of their own) into JWT
// access tokens.
func (s *opStorage) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	return map[string]any{"groups": users[userID].groups, "scope": strings.Join(scopes, " ")}, nil
}

// SetIntrospectionFromToken adds the groups to an active introspection
// response.
func (s *opStorage) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	if err := s.Storage.SetIntrospectionFromToken(ctx, resp, tokenID, subject, clientID); err != nil {
		return err
	}
	if resp.Claims == nil {
		resp.Claims = map[string]any{}
	}
	resp.Claims["groups"] = users[subject].groups
	return nil
}

// publicClient is a native MCP client: no secret, PKCE, loopback redirect.
type publicClient struct {
	id        string
	tokenType op.AccessTokenType
}

func (c publicClient) GetID() string                       { return c.id }
func (c publicClient) RedirectURIs() []string              { return []string{RedirectURI} }
func (c publicClient) PostLogoutRedirectURIs() []string    { return nil }
func (c publicClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c publicClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c publicClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c publicClient) GrantTypes() []oidc.GrantType        { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c publicClient) LoginURL(id string) string           { return "/login/username?authRequestID=" + id }
func (c publicClient) AccessTokenType() op.AccessTokenType { return c.tokenType }
func (c publicClient) IDTokenLifetime() time.Duration      { return time.Hour }
func (c publicClient) DevMode() bool                       { return true }
func (c publicClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c publicClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c publicClient) IsScopeAllowed(scope string) bool     { return scope == Scope }
func (c publicClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c publicClient) ClockSkew() time.Duration             { return 0 }
