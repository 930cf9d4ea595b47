package status

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"

	"github.com/mcp-proxy/mcp-proxy/authn"
	"github.com/mcp-proxy/mcp-proxy/internal/randid"
)

// Cookies of the page. Both are HttpOnly (no script reads them) and
// SameSite=Strict (no other site's page or link sends them). Neither
// authorizes an action: browsers keep cookies per host, not per port
// (RFC 6265 §8.5), and 127.0.0.1:8000 is the same site as 127.0.0.1:9464,
// so the browser sends them to every server on the host, another local
// user's too, which may replay them.
const (
	// sessionCookie lets the browser read the page when metrics.tokens is
	// set: it holds an HMAC of the token that signed in under the
	// process's key (never the token), so a restart asks for the token
	// again. It opens no action (actionField does).
	sessionCookie = "mcp_proxy_status_session"
	// csrfCookie holds a random seed; the actions' forms carry its HMAC
	// under the process's key (a signed double-submit token).
	csrfCookie = "mcp_proxy_status_csrf"
	// csrfField is the form field of that HMAC.
	csrfField = "csrf"
	// actionField is the form field of the action key: the HMAC of the
	// token that signed in under the process's key, for actions. The sign-in
	// answer hands it to the page in the fragment of its redirect
	// (/#act=K), which browsers never send to a server; the page's script
	// keeps it in sessionStorage, which is per origin (scheme, host and
	// port), and puts it in the action forms. No cookie holds it, so a
	// server on another port of the host never receives it.
	actionField = "act"
	// actionFragment starts the fragment of the sign-in redirect.
	actionFragment = "#" + actionField + "="
	// seedBytes is the size of a CSRF seed.
	seedBytes = 32
)

// access is who may see the page and act on it.
type access struct {
	tokens    []string // metrics.tokens: each opens the page and its actions
	pageToken string   // the status token; "" when there is none
	key       []byte   // the process's key: cookies and forms of an earlier process do not validate
}

func newAccess(tokens []string, pageToken string) access {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // raw HMAC key bytes, not an encoded id (so not randid); never fails (Go 1.24)
	return access{tokens: tokens, pageToken: pageToken, key: key}
}

// secrets are the tokens that sign in: metrics.tokens and the status token.
func (a access) secrets() []string {
	if a.pageToken == "" {
		return a.tokens
	}
	return append(append([]string(nil), a.tokens...), a.pageToken)
}

// canSignIn reports whether any token signs in.
func (a access) canSignIn() bool { return len(a.tokens) > 0 || a.pageToken != "" }

// signedIn reports whether r carries a token that signs in: in the
// Authorization header (compared as /metrics compares it, in constant time)
// or as the session cookie of one.
func (a access) signedIn(r *http.Request) bool {
	s := a.secrets()
	if len(s) == 0 {
		return false
	}
	return authn.StaticBearer(r.Header.Get("Authorization"), s) || a.hasSession(r)
}

// hasSession reports whether r carries the session cookie of a token.
func (a access) hasSession(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	ok := false
	for _, tok := range a.secrets() {
		ok = hmac.Equal([]byte(c.Value), []byte(a.mac("session", tok))) || ok
	}
	return ok
}

// authorized reports whether r may see the page: no metrics.tokens are
// configured, or r is signed in.
func (a access) authorized(r *http.Request) bool {
	return len(a.tokens) == 0 || a.signedIn(r)
}

// validToken reports whether tok signs in: one of metrics.tokens or the
// status token, compared in constant time.
func (a access) validToken(tok string) bool {
	return tok != "" && authn.StaticBearer("Bearer "+tok, a.secrets())
}

// isPageToken reports whether tok is the status token, in constant time.
func (a access) isPageToken(tok string) bool {
	return a.pageToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.pageToken)) == 1
}

// mac is the HMAC of value for purpose under the process's key, base64url.
func (a access) mac(purpose, value string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("mcp-proxy status " + purpose + "\x00" + value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// actionKey is the action key of tok (a token that signs in).
func (a access) actionKey(tok string) string { return a.mac("action", tok) }

// actionsAllowed reports whether r may act (log in, approve, keep): it
// carries a token in the Authorization header (a script or curl), or the
// action key of one in its form (the page, after signing in). The
// cookies do not suffice: other servers of the host receive them.
// Reading the page gives no token (only the CSRF seed), so another local
// user who can open the page still cannot act.
func (a access) actionsAllowed(r *http.Request) bool {
	s := a.secrets()
	if len(s) == 0 {
		return false
	}
	if authn.StaticBearer(r.Header.Get("Authorization"), s) {
		return true
	}
	got := []byte(r.PostFormValue(actionField))
	ok := false
	for _, tok := range s {
		ok = hmac.Equal(got, []byte(a.actionKey(tok))) || ok
	}
	return ok && len(got) > 0
}

// seed returns the request's CSRF seed, setting a new cookie when it has
// none (or not one of ours).
func (a access) seed(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validSeed(c.Value) {
		return c.Value
	}
	s := randid.Hex(seedBytes)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: s, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return s
}

func validSeed(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == seedBytes
}

// csrf is the form token of seed.
func (a access) csrf(seed string) string { return a.mac("csrf", seed) }

// checkCSRF reports whether a POST carries the form token of its seed
// cookie, and was not sent by another site (Sec-Fetch-Site, where the
// browser sends it). The Origin header was checked before (httpguard).
func (a access) checkCSRF(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validSeed(c.Value) {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(a.csrf(c.Value)))
}

// startSession sets the session cookie of tok (a valid token) for the
// browser's session (no expiry).
func (a access) startSession(w http.ResponseWriter, r *http.Request, tok string) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: a.mac("session", tok), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// endSession removes the session cookie.
func endSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}
