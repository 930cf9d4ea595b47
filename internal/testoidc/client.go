package testoidc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// requestTimeout bounds each HTTP request of a login (loopback requests;
// generous for a busy machine).
const requestTimeout = 20 * time.Second

// Connect runs the Go SDK client's OAuth flow (authorization code + PKCE,
// discovery from the 401) as user against the MCP endpoint and returns the
// session, which the caller closes. clientID is JWTClientID or
// OpaqueClientID; sopts are the session's options (nil: the SDK's
// defaults, which try the stateless protocol first). The Wire holds every request the client sent to the
// endpoint, its metadata and the provider's metadata and token endpoints
// (the login page is played aside, as a browser would); it is returned
// with the error too, to say how far the flow went.
func Connect(ctx context.Context, endpoint, clientID, user string, sopts *mcp.ClientSessionOptions) (*mcp.ClientSession, *Wire, error) {
	rec := &Wire{next: http.DefaultTransport}
	hc := &http.Client{Transport: rec, Timeout: requestTimeout}
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: clientID},
		RedirectURL:         RedirectURI,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			code, state, iss, err := login(ctx, args.URL, user)
			if err != nil {
				return nil, err
			}
			return &auth.AuthorizationResult{Code: code, State: state, Iss: iss}, nil
		},
		AcceptUnadvertisedIss: true,
		Client:                hc,
	})
	if err != nil {
		return nil, rec, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "testoidc", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h, HTTPClient: hc, MaxRetries: -1}, sopts)
	return cs, rec, err
}

// Token logs user in with the JWT client (authorization code + PKCE, RFC
// 8707 resource) and returns the access token, for tests that send tokens
// of their choosing: another resource's, one without a scope. scopes
// default to [Scope].
func (p *Provider) Token(ctx context.Context, user, resource string, scopes ...string) (string, error) {
	if len(scopes) == 0 {
		scopes = []string{Scope}
	}
	conf := &oauth2.Config{
		ClientID:    JWTClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: p.AuthorizationEndpoint, TokenURL: p.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: RedirectURI,
		Scopes:      scopes,
	}
	verifier, state := oauth2.GenerateVerifier(), rand.Text()
	res := oauth2.SetAuthURLParam("resource", resource)
	code, gotState, _, err := login(ctx, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), res), user)
	if err != nil {
		return "", err
	}
	if gotState != state {
		return "", errors.New("the provider returned another state")
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: requestTimeout})
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier), res)
	if err != nil {
		return "", fmt.Errorf("token exchange: %w", err)
	}
	return tok.AccessToken, nil
}

// login plays user at the provider's login page: it follows the
// authorization URL, posts the credentials, and returns the code, state
// and iss from the redirect to RedirectURI (which is never contacted).
func login(ctx context.Context, authURL, user string) (code, state, iss string, err error) {
	client := &http.Client{
		Timeout: requestTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host == "127.0.0.1" && req.URL.Path == "/callback" {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", "", "", err
	}
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
	form := url.Values{"username": {user}, "password": {users[user].password}, "id": {id}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, loginURL.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return "", "", "", err
	}
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

// Wire records what a client sends and receives: one line per request,
//
//	METHOD PATH -> STATUS[ | WWW-Authenticate: …][ | Mcp-Session-Id: set]
//
// (or "METHOD PATH -> error" when no response came), and the bearer
// tokens the client sent. It is an http.RoundTripper, safe for concurrent
// use.
type Wire struct {
	next   http.RoundTripper
	mu     sync.Mutex
	lines  []string
	tokens []string
}

// RoundTrip sends r and records it.
func (w *Wire) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(r)
	line := r.Method + " " + r.URL.Path + " -> "
	if err != nil {
		line += "error"
	} else {
		line += fmt.Sprint(resp.StatusCode)
		if c := resp.Header.Get("WWW-Authenticate"); c != "" {
			line += " | WWW-Authenticate: " + c
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			line += " | Mcp-Session-Id: set"
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
		if len(w.tokens) == 0 || w.tokens[len(w.tokens)-1] != tok {
			w.tokens = append(w.tokens, tok)
		}
	}
	return resp, err
}

// Lines returns the requests recorded so far, in the order their
// responses came.
func (w *Wire) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// Log returns Lines joined by newlines.
func (w *Wire) Log() string { return strings.Join(w.Lines(), "\n") }

// Tokens returns the bearer tokens the client sent, each once per run of
// requests that carried it.
func (w *Wire) Tokens() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.tokens...)
}

// InOrder checks that steps were recorded in this order (other lines may
// come between them). A step matches a line that equals it, or that
// starts with it followed by " | " (a step may leave out the headers).
func (w *Wire) InOrder(steps ...string) error {
	lines := w.Lines()
	i := 0
	for _, step := range steps {
		for i < len(lines) && lines[i] != step && !strings.HasPrefix(lines[i], step+" | ") {
			i++
		}
		if i == len(lines) {
			return fmt.Errorf("the client's requests lack %q in this order:\n%s", step, strings.Join(lines, "\n"))
		}
		i++
	}
	return nil
}
