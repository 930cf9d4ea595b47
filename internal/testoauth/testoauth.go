// Package testoauth runs, for tests, an MCP server behind OAuth as a hosted
// one looks to the proxy: the resource at /mcp answers a request without a
// token it issued with 401 and a WWW-Authenticate naming its protected
// resource metadata (RFC 9728), and its own authorization server publishes
// RFC 8414 metadata and serves dynamic client registration (/register), an
// authorize endpoint that approves at once (/authorize) and a token
// endpoint with PKCE (S256) and, optionally, single-use refresh tokens
// (/token).
//
// It is test code: product packages must not import it.
package testoauth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Grant labels of the access tokens the server issues (see Server.Grant).
const (
	GrantLogin   = "login"   // issued for an authorization code
	GrantRefresh = "refresh" // issued for a refresh token
)

// defaultTokenSeconds is the lifetime of an access token when Options
// leaves it zero: an hour, longer than any test.
const defaultTokenSeconds = 3600

// Options say how a Server differs from the default. The zero value is a
// server that issues hour-long access tokens and no refresh tokens.
type Options struct {
	// MCP serves the requests to /mcp that carry a bearer token the
	// server issued. Required.
	MCP http.Handler
	// RefreshTokens makes the token endpoint issue a refresh token with
	// every access token, each good for one refresh grant.
	RefreshTokens bool
	// LoginTokenSeconds and RefreshedTokenSeconds are the lifetimes
	// (expires_in) of the access tokens issued for an authorization code
	// and for a refresh token; zero means an hour.
	LoginTokenSeconds, RefreshedTokenSeconds int
	// BeforeRefresh, if not nil, is called for each refresh grant before
	// the token endpoint looks at it, outside the server's lock, so it may
	// block (to hold grants that would otherwise race).
	BeforeRefresh func()
}

// Server is the MCP server and its authorization server on a loopback
// port, closed when the test ends. Its methods are safe for concurrent use.
type Server struct {
	srv  *httptest.Server
	opts Options

	mu       sync.Mutex
	codes    map[string]string // code -> PKCE challenge
	access   map[string]string // access token -> its grant label
	issued   []string          // access tokens, in the order issued
	refresh  map[string]bool   // refresh tokens not used yet
	grants   map[string]int    // grant_type -> tokens issued
	refused  []string          // grants refused, as "grant_type: error"
	authSeen []string          // the Authorization header of each request to /mcp
	next     int
}

// New starts a Server with opts.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.MCP == nil {
		t.Fatal("testoauth: Options.MCP is nil")
	}
	s := &Server{opts: opts, codes: map[string]string{}, access: map[string]string{}, refresh: map[string]bool{}, grants: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", s.resource)
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": s.URL("/mcp"), "authorization_servers": []string{s.Issuer()}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("/register", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": "proxy-client", "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's address with path p.
func (s *Server) URL(p string) string { return s.srv.URL + p }

// Issuer is the authorization server's issuer, the server's base URL.
func (s *Server) Issuer() string { return s.srv.URL }

// resource checks the bearer token of a request to /mcp and hands it to
// Options.MCP, or answers 401 pointing at the protected resource metadata.
func (s *Server) resource(w http.ResponseWriter, r *http.Request) {
	h := r.Header.Get("Authorization")
	s.mu.Lock()
	s.authSeen = append(s.authSeen, h)
	_, ok := s.access[strings.TrimPrefix(h, "Bearer ")]
	s.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+s.URL("/.well-known/oauth-protected-resource/mcp")+`"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	s.opts.MCP.ServeHTTP(w, r)
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	grants := []string{"authorization_code"}
	if s.opts.RefreshTokens {
		grants = append(grants, "refresh_token")
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": s.Issuer(), "authorization_endpoint": s.URL("/authorize"), "token_endpoint": s.URL("/token"),
		"registration_endpoint": s.URL("/register"), "code_challenge_methods_supported": []string{"S256"},
		"response_types_supported": []string{"code"}, "grant_types_supported": grants,
		"token_endpoint_auth_methods_supported": []string{"none"},
	})
}

// authorize approves at once: it keeps the PKCE challenge under a new code
// and redirects to redirect_uri with the code and the state.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.next++
	code := fmt.Sprintf("code-%d", s.next)
	s.codes[code] = q.Get("code_challenge")
	s.mu.Unlock()
	bq := back.Query()
	bq.Set("code", code)
	bq.Set("state", q.Get("state"))
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token serves the token endpoint: an authorization code for this
// resource (PKCE checked) or, with Options.RefreshTokens, a refresh token,
// each good once.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f := r.PostForm
	grant := f.Get("grant_type")
	if grant == "refresh_token" && s.opts.RefreshTokens && s.opts.BeforeRefresh != nil {
		s.opts.BeforeRefresh()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	refuse := func(e string) {
		s.refused = append(s.refused, grant+": "+e)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": e})
	}
	var label string
	var expires int
	switch {
	case grant == "authorization_code":
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		ch, ok := s.codes[f.Get("code")]
		if !ok || ch != base64.RawURLEncoding.EncodeToString(sum[:]) || f.Get("resource") != s.URL("/mcp") {
			refuse("invalid_grant")
			return
		}
		delete(s.codes, f.Get("code"))
		label, expires = GrantLogin, orDefault(s.opts.LoginTokenSeconds)
	case grant == "refresh_token" && s.opts.RefreshTokens:
		if !s.refresh[f.Get("refresh_token")] {
			refuse("invalid_grant")
			return
		}
		delete(s.refresh, f.Get("refresh_token"))
		label, expires = GrantRefresh, orDefault(s.opts.RefreshedTokenSeconds)
	default:
		refuse("unsupported_grant_type")
		return
	}
	s.grants[grant]++
	s.next++
	access := fmt.Sprintf("access-%d", s.next)
	s.access[access] = label
	s.issued = append(s.issued, access)
	body := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": expires}
	if s.opts.RefreshTokens {
		refresh := fmt.Sprintf("refresh-%d", s.next)
		s.refresh[refresh] = true
		body["refresh_token"] = refresh
	}
	writeJSON(w, http.StatusOK, body)
}

func orDefault(seconds int) int {
	if seconds == 0 {
		return defaultTokenSeconds
	}
	return seconds
}

// Grant is the label (GrantLogin or GrantRefresh) of the grant that issued
// the access token in authorization, a request's Authorization header, or
// "" if the server did not issue it.
func (s *Server) Grant(authorization string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.access[strings.TrimPrefix(authorization, "Bearer ")]
}

// Revoke forgets every access and refresh token issued so far, as an
// authorization server that revoked them: the next request with one gets a
// 401, the next refresh grant is refused.
func (s *Server) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
	clear(s.refresh)
}

// Issued returns the access tokens issued so far, revoked or not, oldest
// first.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.issued...)
}

// Seen returns the Authorization header of every request to /mcp so far
// ("" for none), oldest first.
func (s *Server) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.authSeen...)
}

// Counts returns the tokens issued by grant type and the grants refused,
// each as "grant_type: error".
func (s *Server) Counts() (map[string]int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	grants := make(map[string]int, len(s.grants))
	for k, v := range s.grants {
		grants[k] = v
	}
	return grants, append([]string(nil), s.refused...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
