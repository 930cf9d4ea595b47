package authn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
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

// The OpenID provider of the end-to-end tests is zitadel/oidc's op package
// with its example in-memory storage and login page, run in-process on a
// loopback port. opStorage adjusts that storage the way a real deployment
// configures its provider: the MCP clients are public clients (PKCE) whose
// access tokens are JWTs (or opaque, for introspection), the audience is the
// RFC 8707 resource the client asked for, and users carry a groups claim.

// Users of the test provider and their groups.
var opUsers = map[string]struct {
	password string
	groups   []string
}{
	"alice": {"alice-pw", []string{"eng"}},
	"bob":   {"bob-pw", []string{"sales"}},
	"carol": {"carol-pw", nil},
}

// Client ids and redirect URI of the test provider.
const (
	jwtClientID    = "mcp-client"
	opaqueClientID = "mcp-client-opaque"
	redirectURI    = "http://127.0.0.1/callback"
	// resourceServerID and resourceServerSecret are the proxy's credentials
	// at the introspection endpoint.
	resourceServerID     = "mcp-proxy"
	resourceServerSecret = "rs-secret-0123"
)

// userStore implements storage.UserStore for opUsers.
type userStore struct{}

func (userStore) GetUserByID(id string) *storage.User { return userStore{}.GetUserByUsername(id) }
func (userStore) ExampleClientID() string             { return "service" }
func (userStore) GetUserByUsername(name string) *storage.User {
	u, ok := opUsers[name]
	if !ok {
		return nil
	}
	return &storage.User{ID: name, Username: name, Password: u.password, FirstName: name, LastName: "Test",
		Email: name + "@example.com", EmailVerified: true, PreferredLanguage: language.English}
}

// opStorage is the example storage with the adjustments described above.
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
		aud = []string{res, resourceServerID}
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
	case jwtClientID:
		return publicClient{id: id, tokenType: op.AccessTokenTypeJWT}, nil
	case opaqueClientID:
		return publicClient{id: id, tokenType: op.AccessTokenTypeBearer}, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

func (s *opStorage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	if id == resourceServerID && secret == resourceServerSecret {
		return nil
	}
	return errors.New("invalid client")
}

// GetPrivateClaimsFromScopes puts the user's groups and the granted scopes
// (zitadel's JWT access tokens carry no scope claim of their own) into JWT
// access tokens.
func (s *opStorage) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	return map[string]any{"groups": opUsers[userID].groups, "scope": strings.Join(scopes, " ")}, nil
}

// SetIntrospectionFromToken adds the groups and audience to an active
// introspection response.
func (s *opStorage) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	if err := s.Storage.SetIntrospectionFromToken(ctx, resp, tokenID, subject, clientID); err != nil {
		return err
	}
	if resp.Claims == nil {
		resp.Claims = map[string]any{}
	}
	resp.Claims["groups"] = opUsers[subject].groups
	return nil
}

// publicClient is a native MCP client: no secret, PKCE, loopback redirect.
type publicClient struct {
	id        string
	tokenType op.AccessTokenType
}

func (c publicClient) GetID() string                       { return c.id }
func (c publicClient) RedirectURIs() []string              { return []string{redirectURI} }
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
func (c publicClient) IsScopeAllowed(scope string) bool     { return scope == "mcp" }
func (c publicClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c publicClient) ClockSkew() time.Duration             { return 0 }

var quietSlog sync.Once

// startProvider runs the OpenID provider on a loopback port and returns its
// issuer URL.
func startProvider(t *testing.T) string {
	t.Helper()
	// The example's request log goes to slog's default logger; keep it out
	// of the test output.
	quietSlog.Do(func() { slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	st := &opStorage{
		Storage:   storage.NewStorageWithClients(userStore{}, map[string]*storage.Client{}),
		audiences: map[string][]string{},
	}
	router := exampleop.SetupServer(issuer, st, nil, false)
	// RFC 8707: the provider scopes the token to the resource the client
	// names on the authorization request.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if res := r.URL.Query().Get("resource"); res != "" {
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
		}
		router.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return issuer
}

// login plays the user at the provider's login page: it follows the
// authorization URL, posts the credentials, and returns the code and state
// from the redirect to redirectURI (which is never contacted).
func login(ctx context.Context, authURL, user, password string) (code, state, iss string, err error) {
	client := &http.Client{
		Timeout: 10 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host == "127.0.0.1" && req.URL.Path == "/callback" {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	resp, err := client.Do(req)
	if err != nil {
		return "", "", "", err
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if resp.StatusCode != http.StatusOK || id == "" {
		return "", "", "", errors.New("the authorization URL did not lead to the login page: " + resp.Request.URL.String())
	}
	loginURL := *resp.Request.URL
	loginURL.RawQuery = ""
	form := url.Values{"username": {user}, "password": {password}, "id": {id}}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, loginURL.String(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = client.Do(req)
	if err != nil {
		return "", "", "", err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || resp.StatusCode != http.StatusFound {
		return "", "", "", errors.New("the login did not redirect to the client")
	}
	q := loc.Query()
	if e := q.Get("error"); e != "" {
		return "", "", "", errors.New("authorization error: " + e + ": " + q.Get("error_description"))
	}
	return q.Get("code"), q.Get("state"), q.Get("iss"), nil
}
