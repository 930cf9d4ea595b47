package status

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"

	"github.com/mcp-proxy/mcp-proxy/authn"
	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

// Cookies of the page. Both are HttpOnly (no script reads them) and
// SameSite=Strict (no other site's page or link sends them). Browsers keep
// cookies per host, not per port, so neither holds anything of use
// elsewhere: not the token itself, only values keyed by this process.
const (
	// sessionCookie proves, when metrics.tokens is set, that the browser
	// gave one of the tokens: it holds an HMAC of the token under the
	// process's key, so it authorizes this process's page and actions (as
	// the Authorization header authorizes /metrics) and nothing else, and a
	// restart asks for the token again.
	sessionCookie = "mcp_proxy_status_session"
	// csrfCookie holds a random seed; the actions' forms carry its HMAC
	// under the process's key (a signed double-submit token).
	csrfCookie = "mcp_proxy_status_csrf"
	// csrfField is the form field of that HMAC.
	csrfField = "csrf"
	// seedBytes is the size of a CSRF seed.
	seedBytes = 32
)

// access is who may see the page and act on it.
type access struct {
	tokens []string
	key    []byte // the process's CSRF key: forms of an earlier process do not validate
}

func newAccess(tokens []string) access {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand never fails (Go 1.24)
	return access{tokens: tokens, key: key}
}

// authorized reports whether r may see the page: no tokens are configured,
// or r carries one in the Authorization header (compared as /metrics
// compares it, in constant time) or the session cookie of one.
func (a access) authorized(r *http.Request) bool {
	if len(a.tokens) == 0 || authn.StaticBearer(r.Header.Get("Authorization"), a.tokens) {
		return true
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	ok := false
	for _, tok := range a.tokens {
		ok = hmac.Equal([]byte(c.Value), []byte(a.mac("session", tok))) || ok
	}
	return ok
}

// validToken reports whether tok is one of metrics.tokens.
func (a access) validToken(tok string) bool {
	return tok != "" && authn.StaticBearer("Bearer "+tok, a.tokens)
}

// mac is the HMAC of value for purpose under the process's key, base64url.
func (a access) mac(purpose, value string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("mcp-proxy status " + purpose + "\x00" + value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// actionsAllowed reports whether r may act (log in, approve): it may see
// the page, and either tokens are configured or the request reached a
// loopback listener. Without tokens, a listener others can reach shows the
// page read-only, since nothing would tell the operator from anyone else.
func (a access) actionsAllowed(r *http.Request) bool {
	if !a.authorized(r) {
		return false
	}
	if len(a.tokens) > 0 {
		return true
	}
	return httpguard.ReachedLoopback(r)
}

// seed returns the request's CSRF seed, setting a new cookie when it has
// none (or not one of ours).
func (a access) seed(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validSeed(c.Value) {
		return c.Value
	}
	b := make([]byte, seedBytes)
	_, _ = rand.Read(b)
	s := hex.EncodeToString(b)
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
