package status

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
	"github.com/mcp-proxy/mcp-proxy/ratelimit"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// Paths the page serves on the metrics listener; config validation keeps
// metrics.path off them (config.StatusPaths).
const (
	pathPage     = "/"
	pathSignIn   = "/login"
	pathSignOut  = "/logout"
	pathAuth     = "/auth/login"
	pathCallback = "/auth/callback"
	pathApprove  = "/tools/approve"
	pathKeep     = "/tools/keep"
)

const (
	// maxFormBytes bounds an action's form: a few short fields.
	maxFormBytes = 16 << 10
	// maxDiffBytes bounds a diff shown on the page; `mcp-proxy tools diff`
	// prints it whole.
	maxDiffBytes = 64 << 10
	// refreshSeconds is how often the page reloads itself (the Window's
	// sampling interval: nothing changes faster on it).
	refreshSeconds = int(SampleInterval / time.Second)
)

//go:embed templates/*.html
var templateFS embed.FS

// Options are the page's sources and actions. State is required; a nil
// action leaves its buttons out.
type Options struct {
	// State gathers what the page shows; it is called once per page view.
	State func() State
	// Window gives the last-5-minutes figures; nil shows none.
	Window *Window
	// Approve pins the pending definition of server's tool while its
	// fingerprint is fingerprint (integrity.Store.ApproveFingerprint) and
	// makes the running proxy apply it. nil: no Approve button.
	Approve func(server, tool, fingerprint string) error
	// BeginLogin begins the OAuth login of server for a browser coming back
	// to redirectURI (the page's own /auth/callback): an oauthclient.Client's
	// BeginLogin, the Client the server's connection waits on. nil: no Log
	// in button.
	BeginLogin func(ctx context.Context, server, redirectURI string) (*oauthclient.BrowserLogin, error)
	// Tokens are metrics.tokens: when set, the page and its actions need
	// one of them or PageToken; empty leaves the page open to read.
	Tokens []string
	// PageToken is the status token (LoadToken): it signs in to the page
	// and its actions, whatever Tokens holds. Without it and without
	// Tokens, the page is read-only.
	PageToken string
	// OnSignIn is called with the outcome of each token entered
	// (SignInOK, SignInWrongToken, SignInThrottled); nil: not counted.
	OnSignIn func(result string)
	// Secrets returns the config's secret values (the running config's,
	// after a reload too): every text the page shows is cleaned of them,
	// and of the generic secret shapes (sanitize). nil: the generic shapes
	// only.
	Secrets func() []string
	// Logger gets one line per action.
	Logger zerolog.Logger
	// Now is the page's clock; nil means time.Now.
	Now func() time.Time
	// Version is shown in the page's header.
	Version string
}

// Handler serves the status page and its actions. It is safe for
// concurrent use.
type Handler struct {
	opts   Options
	access access
	tmpl   *template.Template
	mux    *http.ServeMux

	signIns *ratelimit.Bucket // the sign-in throttle (throttle.go)

	mu      sync.Mutex
	logins  map[string]*oauthclient.BrowserLogin // by state, until the browser comes back
	kept    map[string]string                    // server/tool -> fingerprint kept quarantined
	notices []notice                             // newest first
}

// New returns the page's handler. It answers every path it does not serve
// with 404, so it may be mounted at "/" beside /metrics, /healthz and
// /readyz. The caller applies the listener's Host and Origin checks
// (httpguard.Rebinding) in front of it.
func New(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{
		opts:    opts,
		access:  newAccess(opts.Tokens, opts.PageToken),
		signIns: newSignInBucket(opts.Now()),
		tmpl:    template.Must(template.New("").Funcs(funcs(opts.Now)).ParseFS(templateFS, "templates/*.html")),
		logins:  map[string]*oauthclient.BrowserLogin{},
		kept:    map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathPage+"{$}", h.servePage)
	mux.HandleFunc("POST "+pathSignIn, h.signIn)
	mux.HandleFunc("POST "+pathSignOut, h.signOut)
	mux.HandleFunc("POST "+pathAuth, h.action(h.beginLogin))
	mux.HandleFunc("GET "+pathCallback, h.callback)
	mux.HandleFunc("POST "+pathApprove, h.action(h.approve))
	mux.HandleFunc("POST "+pathKeep, h.action(h.keep))
	h.mux = mux
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := randid.Base64(16)
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+n+"'; script-src 'nonce-"+n+"'; base-uri 'none'; frame-ancestors 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer browsers send "Origin:
	// null" on the page's own form POSTs, which the Origin check refuses.
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nonceKey{}, n)))
}

type nonceKey struct{}

func nonceOf(r *http.Request) string { s, _ := r.Context().Value(nonceKey{}).(string); return s }

// render writes template name with data and status code; a template that
// fails is a 500 without half a page.
func (h *Handler) render(w http.ResponseWriter, code int, name string, data any) {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		h.opts.Logger.Error().Err(err).Str("template", name).Msg("status page: rendering failed")
		http.Error(w, "status page: rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// scrubber cleans the page's texts: the config's secrets and the generic
// secret shapes redacted, control characters removed.
func (h *Handler) scrubber() *sanitize.Scrubber {
	if h.opts.Secrets == nil {
		return nil
	}
	return sanitize.NewScrubber(h.opts.Secrets())
}

// text is one text cleaned by a new scrubber; a page view makes one
// scrubber for all its texts.
func (h *Handler) text(s string) string { return h.scrubber().Text(s) }

// errText is text cut like every error text (sanitize.MaxErrorRunes).
func (h *Handler) errText(s string) string { return sanitize.Error(h.text(s)) }

// messageData is the data of the message template (sign-in form, login
// outcome, refusals).
type messageData struct {
	Nonce   string
	Title   string
	Message string
	// SignIn shows the token form with this CSRF token.
	SignIn bool
	CSRF   string
	// Back links to the page; Refresh goes there after a moment.
	Back, Refresh bool
}

// refuse answers a request that may not see the page (metrics.tokens is
// set) or whose token was wrong: 401 and the token form.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-proxy status"`)
	h.render(w, http.StatusUnauthorized, "message.html", messageData{Nonce: nonceOf(r), Title: "Sign in", Message: msg,
		SignIn: true, CSRF: h.access.csrf(h.access.seed(w, r))})
}

func (h *Handler) message(w http.ResponseWriter, r *http.Request, code int, title, msg string) {
	h.render(w, code, "message.html", messageData{Nonce: nonceOf(r), Title: title, Message: msg, Back: true})
}

// Texts of the sign-in answers.
const (
	msgSignInToSee = "Enter a token of metrics.tokens, or the status page's own token (mcp-proxy status token), to see the status page."
	msgWrongToken  = "That is neither the status page's token nor one of metrics.tokens."
)

// signIn takes the token form: a token that signs in sets the session
// cookie and goes to the page (303); another gets the form again (401),
// or 429 while the throttle holds.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !h.access.canSignIn() {
		http.Redirect(w, r, pathPage, http.StatusSeeOther)
		return
	}
	if !h.access.checkCSRF(r) {
		h.refuse(w, r, "The form expired or did not come from this page; enter the token again.")
		return
	}
	h.signInWith(w, r, r.PostFormValue("token"))
}

// signInWith signs in with tok (from the form or the page's address): the
// session cookie and 303 to the page, whose address then holds no token,
// only the action key in its fragment (/#act=K), which the page's script
// keeps and removes from the address bar.
func (h *Handler) signInWith(w http.ResponseWriter, r *http.Request, tok string) {
	ok, wait := h.checkToken(r, tok)
	switch {
	case ok:
		h.access.startSession(w, r, tok)
		http.Redirect(w, r, pathPage+actionFragment+h.access.actionKey(tok), http.StatusSeeOther)
	case wait > 0:
		h.throttled(w, r, wait)
	default:
		h.refuse(w, r, msgWrongToken)
	}
}

// signOut ends the session cookie.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !h.access.checkCSRF(r) {
		h.message(w, r, http.StatusForbidden, "Refused", "The form expired or did not come from this page.")
		return
	}
	endSession(w, r)
	http.Redirect(w, r, pathPage, http.StatusSeeOther)
}

// action wraps an action's handler: the form is bounded, the request must
// be signed in and carry the CSRF token of its seed cookie.
func (h *Handler) action(next func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		switch {
		case !h.access.authorized(r):
			h.refuse(w, r, msgSignInToSee)
		case !h.access.actionsAllowed(r):
			h.render(w, http.StatusForbidden, "message.html", messageData{Nonce: nonceOf(r), Title: "Read-only",
				Message: h.readOnlyReason(), SignIn: h.access.canSignIn(), CSRF: h.access.csrf(h.access.seed(w, r)), Back: true})
		case !h.access.checkCSRF(r):
			h.message(w, r, http.StatusForbidden, "Refused", "The form expired or did not come from this page; reload the page and try again.")
		default:
			next(w, r)
		}
	}
}

// readOnlyReason is why the page offers no actions to a browser that is
// not signed in (metrics.tokens is not set, or it would not see the page).
func (h *Handler) readOnlyReason() string {
	if !h.access.canSignIn() {
		return "This status page is read-only: it has no token (the status token could not be kept in state_dir; the proxy's log says why) and metrics.tokens is not set. " +
			"Use the mcp-proxy auth and tools commands."
	}
	return "This status page is read-only until you sign in with its token in this tab (with JavaScript on): open the address the proxy printed when it started " +
		"(the log line \"serving the status page\"), or the one `mcp-proxy status url` prints, or enter the token (`mcp-proxy status token`) here."
}

// isHTTPS reports whether the page is served over TLS.
func isHTTPS(r *http.Request) bool { return r.TLS != nil }

// pageOrigin is the page's own origin as the browser addressed it (the
// Host header, which the listener's checks have accepted).
func pageOrigin(r *http.Request) string {
	scheme := "http://"
	if isHTTPS(r) {
		scheme = "https://"
	}
	return scheme + strings.ToLower(r.Host)
}
