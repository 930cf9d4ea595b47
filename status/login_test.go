package status

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// authServer is an OAuth-protected MCP URL and its authorization server
// in one: protected resource metadata, RFC 8414 metadata, registration,
// an authorize endpoint that approves at once (or refuses, with deny), a
// token endpoint that checks PKCE, the redirect URI and the resource.
type authServer struct {
	srv *httptest.Server

	mu         sync.Mutex
	deny       bool
	registered []string // redirect_uris of every registration
	codes      map[string]url.Values
	issued     []string
}

func newAuthServer(t *testing.T) *authServer {
	a := &authServer{codes: map[string]url.Values{}}
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+a.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		js(w, http.StatusOK, map[string]any{"resource": a.srv.URL + "/mcp", "authorization_servers": []string{a.srv.URL}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		js(w, http.StatusOK, map[string]any{"issuer": a.srv.URL, "authorization_endpoint": a.srv.URL + "/authorize",
			"token_endpoint": a.srv.URL + "/token", "registration_endpoint": a.srv.URL + "/register",
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"}})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		var meta struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		_ = json.NewDecoder(r.Body).Decode(&meta)
		a.mu.Lock()
		a.registered = append(a.registered, meta.RedirectURIs...)
		a.mu.Unlock()
		js(w, http.StatusCreated, map[string]any{"client_id": "page-client", "token_endpoint_auth_method": "none", "redirect_uris": meta.RedirectURIs})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		bq := url.Values{"state": {q.Get("state")}}
		if a.deny {
			bq.Set("error", "access_denied")
			bq.Set("error_description", "the user said no")
		} else {
			code := fmt.Sprintf("code-%d", len(a.codes)+1)
			a.codes[code] = q
			bq.Set("code", code)
		}
		a.mu.Unlock()
		back.RawQuery = bq.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.mu.Lock()
		defer a.mu.Unlock()
		q, ok := a.codes[r.PostForm.Get("code")]
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || q.Get("code_challenge") != base64.RawURLEncoding.EncodeToString(sum[:]) ||
			r.PostForm.Get("redirect_uri") != q.Get("redirect_uri") || r.PostForm.Get("resource") != a.srv.URL+"/mcp" {
			js(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		delete(a.codes, r.PostForm.Get("code"))
		tok := fmt.Sprintf("upstream-access-token-%d", len(a.issued)+1)
		a.issued = append(a.issued, tok)
		js(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// loginPage is a page whose server docs logs in through a real
// oauthclient.Client at as; docs is needs_auth until a token is stored.
func loginPage(t *testing.T, as *authServer, beginErr error) (*page, *oauthclient.Client) {
	t.Helper()
	store, err := oauthclient.OpenStore(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := oauthclient.New(&config.Server{Name: "docs", Transport: "http", URL: as.srv.URL + "/mcp",
		Auth: &config.ServerAuth{Type: "oauth", Open: "none"}}, oauthclient.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p := newPage(t, Options{
		State: func() State {
			st := sampleState()
			for i, s := range st.Servers {
				if s.Name != "docs" {
					continue
				}
				cs := c.Status()
				st.Servers[i].Auth = &Auth{Kind: "oauth", State: cs.State, Expiry: cs.Expiry, Browser: true}
				if c.HasToken() {
					st.Servers[i].State, st.Servers[i].Error = "connected", ""
				}
			}
			return st
		},
		BeginLogin: func(ctx context.Context, server, redirectURI string) (*oauthclient.BrowserLogin, error) {
			if beginErr != nil {
				return nil, beginErr
			}
			if server != "docs" {
				return nil, errors.New("unexpected server " + server)
			}
			return c.BeginLogin(ctx, redirectURI)
		},
		Now: time.Now,
	})
	return p, c
}

// TestLogin: Log in on a needs_auth server answers 303 to the
// authorization server with this page's /auth/callback as redirect URI
// (registered by DCR), state, PKCE S256 and the resource; the browser
// comes back; the callback stores the token (once: a replay is refused),
// the page shows the server authorized with the token's expiry and no Log
// in button, and never the token.
func TestLogin(t *testing.T) {
	as := newAuthServer(t)
	p, c := loginPage(t, as, nil)
	b := p.signedIn(t)
	start := b.submit(b.get("/"), "/auth/login", map[string]string{"server": "docs"}, nil)
	if start.code != http.StatusSeeOther {
		t.Fatalf("Log in: %d\n%s", start.code, start.body)
	}
	loc, err := url.Parse(start.header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), as.srv.URL+"/authorize?") {
		t.Fatalf("Log in redirected to %q", start.header.Get("Location"))
	}
	q := loc.Query()
	for k, want := range map[string]string{"redirect_uri": p.base + "/auth/callback", "code_challenge_method": "S256",
		"resource": as.srv.URL + "/mcp", "client_id": "page-client", "response_type": "code"} {
		if q.Get(k) != want {
			t.Errorf("authorization request %s = %q, want %q", k, q.Get(k), want)
		}
	}
	as.mu.Lock()
	if !slices.Equal(as.registered, []string{p.base + "/auth/callback"}) {
		t.Errorf("registered redirect URIs %v", as.registered)
	}
	as.mu.Unlock()

	// The authorization server approves and sends the browser back.
	back := newBrowser(t, as.srv.URL).get(strings.TrimPrefix(loc.String(), as.srv.URL))
	cb := back.header.Get("Location")
	if back.code != http.StatusFound || !strings.HasPrefix(cb, p.base+"/auth/callback?") {
		t.Fatalf("authorize answered %d to %q", back.code, cb)
	}
	done := b.get(strings.TrimPrefix(cb, p.base))
	if done.code != http.StatusOK || done.text("message") != "Authorized docs; the proxy connects to it now." {
		t.Fatalf("callback: %d %q", done.code, done.text("message"))
	}
	if !c.HasToken() {
		t.Fatal("no token stored after the callback")
	}
	if again := b.get(strings.TrimPrefix(cb, p.base)); again.code != http.StatusBadRequest || !strings.Contains(again.text("message"), "unknown or over") {
		t.Errorf("replayed callback: %d %q", again.code, again.text("message"))
	}

	a := b.get("/")
	if got := a.text("server-docs"); !strings.HasPrefix(got, "docs connected OAuth (oauth): authorized, token expires in 59m") &&
		!strings.HasPrefix(got, "docs connected OAuth (oauth): authorized, token expires in 1h0m") {
		t.Errorf("docs row after the login: %q", got)
	}
	if slices.Contains(a.buttons(), "Log in: docs") {
		t.Error("Log in still offered after the login")
	}
	if got := a.text("notices-list"); !strings.Contains(got, "Authorized docs; the proxy connects to it now.") {
		t.Errorf("notices: %q", got)
	}
	as.mu.Lock()
	issued := as.issued
	as.mu.Unlock()
	for _, body := range []string{start.body, done.body, a.body} {
		if len(issued) != 1 || strings.Contains(body, issued[0]) {
			t.Fatalf("issued %v; the token reached a page", issued)
		}
	}
}

// TestLoginRefusals: the authorization server's refusal, an unknown
// state, a server that is not waiting for a login, and a failure to begin
// (whose text holds a secret) each end on the page with a clear message;
// no token is stored, no secret shown.
func TestLoginRefusals(t *testing.T) {
	as := newAuthServer(t)
	as.deny = true
	p, c := loginPage(t, as, nil)
	b := p.signedIn(t)
	start := b.submit(b.get("/"), "/auth/login", map[string]string{"server": "docs"}, nil)
	back := newBrowser(t, as.srv.URL).get(strings.TrimPrefix(start.header.Get("Location"), as.srv.URL))
	failed := b.get(strings.TrimPrefix(back.header.Get("Location"), p.base))
	if failed.code != http.StatusBadRequest || failed.text("message") != "Authorizing docs failed: the authorization server refused: access_denied (the user said no)" {
		t.Errorf("refused authorization: %d %q", failed.code, failed.text("message"))
	}
	if c.HasToken() {
		t.Error("a token after a refusal")
	}
	if got := b.get("/auth/callback?state=forged&code=x"); got.code != http.StatusBadRequest || !strings.Contains(got.text("message"), "unknown or over") {
		t.Errorf("unknown state: %d %q", got.code, got.text("message"))
	}
	b.submit(b.get("/"), "/auth/login", map[string]string{"server": "docs"}, url.Values{"server": {"fx"}})
	if got := b.get("/").text("notices-list"); !strings.Contains(got, "Log in to fx: that server is not waiting for an OAuth login.") {
		t.Errorf("notices after Log in to a connected server: %q", got)
	}

	p2, _ := loginPage(t, as, fmt.Errorf("discovery: GET https://as.example/x?client_secret=%s: refused %s", configSecret, configSecret))
	b2 := p2.signedIn(t)
	if got := b2.submit(b2.get("/"), "/auth/login", map[string]string{"server": "docs"}, nil); got.code != http.StatusSeeOther || got.header.Get("Location") != "/#servers" {
		t.Fatalf("failed begin: %d %q", got.code, got.header.Get("Location"))
	}
	a := b2.get("/")
	if got := a.text("notices-list"); !strings.Contains(got, "Log in to docs failed: discovery: GET https://as.example/x") || !strings.HasSuffix(got, "refused [REDACTED]") {
		t.Errorf("notice of a failed begin: %q", got)
	}
	if strings.Contains(a.body, configSecret) {
		t.Error("a secret reached the page")
	}
}
