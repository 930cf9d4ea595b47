package status

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

const (
	// maxPendingLogins bounds the logins waiting for their browser; a new
	// one beyond it drops the oldest (one per server is the usual count).
	maxPendingLogins = 16
	// maxNotices is how many recent actions the page lists.
	maxNotices = 10
	// authTimeout bounds the requests to an authorization server that one
	// action makes (discovery and registration, or the code exchange).
	authTimeout = 60 * time.Second
)

// notice is one recent action and its outcome, listed on the page.
type notice struct {
	At      time.Time
	Text    string
	Failure bool
}

// note adds a notice (its text already cleaned) and logs it.
func (h *Handler) note(text string, failure bool) {
	ev := h.opts.Logger.Info()
	if failure {
		ev = h.opts.Logger.Warn()
	}
	ev.Str("component", "status").Msg(text)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notices = append([]notice{{At: h.opts.Now(), Text: text, Failure: failure}}, h.notices...)
	if len(h.notices) > maxNotices {
		h.notices = h.notices[:maxNotices]
	}
}

func (h *Handler) recentNotices() []notice {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]notice(nil), h.notices...)
}

// backToPage answers an action with 303 to the page (post, redirect, get:
// a reload never repeats the action), at fragment.
func backToPage(w http.ResponseWriter, r *http.Request, fragment string) {
	http.Redirect(w, r, pathPage+fragment, http.StatusSeeOther)
}

// beginLogin starts the OAuth login of a server: the authorization request
// is prepared for a redirect to this page's /auth/callback, and the
// browser is sent to the authorization server (303).
func (h *Handler) beginLogin(w http.ResponseWriter, r *http.Request) {
	server := r.PostFormValue("server")
	if h.opts.BeginLogin == nil || !h.canLogIn(server) {
		h.note("Log in to "+h.text(server)+": that server is not waiting for an OAuth login.", true)
		backToPage(w, r, "#servers")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	l, err := h.opts.BeginLogin(ctx, server, pageOrigin(r)+pathCallback)
	if err != nil {
		h.note("Log in to "+server+" failed: "+h.errText(err.Error()), true)
		backToPage(w, r, "#servers")
		return
	}
	h.mu.Lock()
	h.dropExpiredLocked()
	if len(h.logins) >= maxPendingLogins {
		var oldest *oauthclient.BrowserLogin
		for _, p := range h.logins {
			if oldest == nil || p.Expires.Before(oldest.Expires) {
				oldest = p
			}
		}
		delete(h.logins, oldest.State)
	}
	h.logins[l.State] = l
	h.mu.Unlock()
	h.opts.Logger.Info().Str("component", "status").Str("server", server).Msg("status page: authorization started; the browser goes to the authorization server")
	http.Redirect(w, r, l.URL, http.StatusSeeOther)
}

// canLogIn reports whether server is an oauth server waiting for a login.
func (h *Handler) canLogIn(server string) bool {
	for _, s := range h.opts.State().Servers {
		if s.Name == server {
			return s.State == "needs_auth" && s.Auth != nil && s.Auth.Browser
		}
	}
	return false
}

func (h *Handler) dropExpiredLocked() {
	now := time.Now()
	for state, l := range h.logins {
		if now.After(l.Expires) {
			delete(h.logins, state)
		}
	}
}

// callback takes the browser back from the authorization server: the
// login is found by its state (once), its code exchanged and the token
// stored, where the server's connection picks it up. It needs no session
// cookie, which a browser does not send on another site's redirect
// (SameSite=Strict): the state, known only to the browser that began the
// login from this page, and PKCE stand for it.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	h.mu.Lock()
	h.dropExpiredLocked()
	l := h.logins[state]
	delete(h.logins, state)
	h.mu.Unlock()
	if l == nil || state == "" {
		h.message(w, r, http.StatusBadRequest, "Unknown authorization",
			"This authorization is unknown or over: it was completed already, took longer than its time, or the proxy restarted since it began. Start again with Log in on the status page.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	if err := l.Complete(ctx, r.URL.Query()); err != nil {
		msg := "Authorizing " + l.Server + " failed: " + h.errText(err.Error())
		h.note(msg, true)
		h.message(w, r, http.StatusBadRequest, "Authorization failed", msg)
		return
	}
	msg := "Authorized " + l.Server + "; the proxy connects to it now."
	h.note(msg, false)
	// The page is reached by a link of this origin, not by a redirect
	// chain that began at the authorization server: that request would
	// be cross-site, and the browser would not send the session cookie.
	h.render(w, http.StatusOK, "message.html", messageData{Nonce: nonceOf(r), Title: "Authorized", Message: msg, Back: true, Refresh: true})
}

// approve pins the pending definition of a quarantined tool, if it is
// still the one shown on the page (its fingerprint).
func (h *Handler) approve(w http.ResponseWriter, r *http.Request) {
	server, tool, fp := r.PostFormValue("server"), r.PostFormValue("tool"), r.PostFormValue("fingerprint")
	name := h.text(server + "/" + tool)
	if h.opts.Approve == nil {
		h.note("Approve "+name+": approvals are not available here.", true)
		backToPage(w, r, "#quarantine")
		return
	}
	err := h.opts.Approve(server, tool, fp)
	switch {
	case errors.Is(err, integrity.ErrPendingChanged):
		h.note("Not approved "+name+": its definition changed again since the page showed it; review the new diff.", true)
	case err != nil:
		h.note("Approving "+name+" failed: "+h.errText(err.Error()), true)
	default:
		h.note("Approved "+name+": its definition "+integrity.ShortFingerprint(fp)+" is pinned.", false)
	}
	backToPage(w, r, "#quarantine")
}

// keep records that the operator reviewed a quarantined tool's definition
// and keeps it held: the page marks it so until the definition changes
// again. Nothing is written: the tool stays quarantined and its pending
// definition stays approvable (here or with mcp-proxy tools approve).
func (h *Handler) keep(w http.ResponseWriter, r *http.Request) {
	server, tool, fp := r.PostFormValue("server"), r.PostFormValue("tool"), r.PostFormValue("fingerprint")
	name := h.text(server + "/" + tool)
	held := false
	for _, t := range h.opts.State().Held {
		if t.Server == server && t.Tool == tool && t.Fingerprint == fp {
			held = true
		}
	}
	if !held {
		h.note("Keep "+name+" quarantined: it is not held with that definition any more.", true)
		backToPage(w, r, "#quarantine")
		return
	}
	h.mu.Lock()
	h.kept[server+"/"+tool] = fp
	h.mu.Unlock()
	h.note("Kept "+name+" quarantined ("+integrity.ShortFingerprint(fp)+").", false)
	backToPage(w, r, "#quarantine")
}
