package oauthclient

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
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// fakeAS is an authorization server and a protected MCP endpoint in one
// httptest server: /mcp answers 200 to a known bearer token and 401 (with
// a challenge) otherwise. Hooks let a test break any step.
type fakeAS struct {
	t   *testing.T
	srv *httptest.Server
	mux http.Handler // the fake's own routes

	mu          sync.Mutex
	challenge   string     // the 401's WWW-Authenticate; "" means the default
	prm         func() any // PRM document; nil: the default
	asMeta      func() any // AS metadata; nil: the default
	token       http.HandlerFunc
	valid       map[string][]string // access token -> scopes
	refreshes   map[string]bool     // live refresh tokens
	requireAll  []string            // scopes /mcp needs (403 insufficient_scope otherwise)
	codes       map[string]codeInfo
	authorizeQ  []url.Values // every authorize request
	tokenForms  []url.Values // every token request
	registers   int
	registered  []map[string]any // every registration request's metadata
	redirectIss []string         // iss values of the authorization response; nil: none
	clientID    string           // the client_id registrations get
	tokenClient []string         // the client id of every token request (form or Basic)
	// accept, if set, decides which bearer tokens /mcp takes (with their
	// scopes) instead of valid: a server trusting another fake's tokens.
	accept      func(tok string) ([]string, bool)
	expiresIn   int
	issued      int
	mcpAuthSeen []string // Authorization headers /mcp got
}

type codeInfo struct {
	challenge, resource string
	scopes              []string
}

func newFakeAS(t *testing.T) *fakeAS {
	f := &fakeAS{t: t, valid: map[string][]string{}, refreshes: map[string]bool{}, codes: map[string]codeInfo{}, expiresIn: 3600, clientID: "reg-client"}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", f.serveMCP)
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		doc := f.prm
		f.mu.Unlock()
		if doc != nil {
			writeJSON(w, doc())
			return
		}
		writeJSON(w, map[string]any{"resource": f.url("/mcp"), "authorization_servers": []string{f.url("/as")}, "scopes_supported": []string{"read"}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server/as", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		doc := f.asMeta
		f.mu.Unlock()
		if doc != nil {
			writeJSON(w, doc())
			return
		}
		writeJSON(w, f.defaultMeta())
	})
	mux.HandleFunc("/as/register", func(w http.ResponseWriter, r *http.Request) {
		var meta map[string]any
		_ = json.NewDecoder(r.Body).Decode(&meta)
		f.mu.Lock()
		f.registers++
		f.registered = append(f.registered, meta)
		id := f.clientID
		f.mu.Unlock()
		writeJSONStatus(w, http.StatusCreated, map[string]any{"client_id": id, "client_secret": "reg-secret-value", "token_endpoint_auth_method": "client_secret_basic", "redirect_uris": meta["redirect_uris"]})
	})
	mux.HandleFunc("/as/authorize", f.serveAuthorize)
	mux.HandleFunc("/as/token", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		h := f.token
		f.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		f.serveToken(w, r)
	})
	f.mux = mux
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAS) srvMux() http.Handler { return f.mux }

func (f *fakeAS) url(p string) string { return f.srv.URL + p }

func (f *fakeAS) defaultMeta() map[string]any {
	return map[string]any{
		"issuer": f.url("/as"), "authorization_endpoint": f.url("/as/authorize"), "token_endpoint": f.url("/as/token"),
		"registration_endpoint": f.url("/as/register"), "code_challenge_methods_supported": []string{"S256"},
		"response_types_supported": []string{"code"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
	}
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeAS) serveMCP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := r.Header.Get("Authorization")
	f.mcpAuthSeen = append(f.mcpAuthSeen, h)
	tok, ok := strings.CutPrefix(h, "Bearer ")
	scopes, known := f.valid[tok]
	if f.accept != nil {
		scopes, known = f.accept(tok)
	}
	if !ok || !known {
		ch := f.challenge
		if ch == "" {
			ch = fmt.Sprintf(`Bearer resource_metadata="%s", scope="read"`, f.url("/.well-known/oauth-protected-resource/mcp"))
		}
		w.Header().Set("WWW-Authenticate", ch)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if !covers(scopes, f.requireAll) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s"`, strings.Join(f.requireAll, " ")))
		w.WriteHeader(http.StatusForbidden)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func (f *fakeAS) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	f.authorizeQ = append(f.authorizeQ, q)
	code := fmt.Sprintf("code-%d", len(f.authorizeQ))
	f.codes[code] = codeInfo{challenge: q.Get("code_challenge"), resource: q.Get("resource"), scopes: strings.Fields(q.Get("scope"))}
	iss := f.redirectIss
	f.mu.Unlock()
	u, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	back := u.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	for _, v := range iss {
		back.Add("iss", v)
	}
	u.RawQuery = back.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// serveToken issues tokens for codes (checking PKCE), refresh tokens and
// client_credentials.
func (f *fakeAS) serveToken(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	form := r.PostForm
	f.tokenForms = append(f.tokenForms, form)
	client := form.Get("client_id")
	if user, _, ok := r.BasicAuth(); ok {
		client = user
	}
	f.tokenClient = append(f.tokenClient, client)
	var scopes []string
	switch form.Get("grant_type") {
	case "authorization_code":
		ci, ok := f.codes[form.Get("code")]
		sum := sha256.Sum256([]byte(form.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != ci.challenge {
			writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "bad code or verifier"})
			return
		}
		delete(f.codes, form.Get("code"))
		scopes = ci.scopes
	case "refresh_token":
		if !f.refreshes[form.Get("refresh_token")] {
			writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "refresh token revoked"})
			return
		}
		delete(f.refreshes, form.Get("refresh_token"))
		scopes = []string{"read"}
	case "client_credentials":
		scopes = strings.Fields(form.Get("scope"))
	default:
		writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	f.issued++
	access := fmt.Sprintf("at-%d-%d", f.issued, time.Now().UnixNano())
	refresh := fmt.Sprintf("rt-%d-%d", f.issued, time.Now().UnixNano())
	f.valid[access] = scopes
	f.refreshes[refresh] = true
	writeJSON(w, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": f.expiresIn, "refresh_token": refresh, "scope": strings.Join(scopes, " ")})
}

func (f *fakeAS) set(fn func(*fakeAS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeAS) snapshot(fn func(*fakeAS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// serverCfg is a config.Server for the fake's /mcp.
func (f *fakeAS) serverCfg(auth config.ServerAuth) *config.Server {
	if auth.Type == "" {
		auth.Type = KindOAuth
	}
	if auth.Open == "" {
		auth.Open = OpenNone
	}
	return &config.Server{Name: "web", Transport: "http", URL: f.url("/mcp"), Auth: &auth}
}

// browse is a Prompt that plays the user's browser: it follows the
// authorization URL to the callback.
func browse(t *testing.T) Prompt {
	return func(p LoginPrompt) {
		go func() {
			resp, err := http.Get(p.URL)
			if err != nil {
				t.Logf("browser: %v", err)
				return
			}
			resp.Body.Close()
		}()
	}
}
