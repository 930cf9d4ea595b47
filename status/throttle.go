package status

import (
	"net/http"
	"strconv"
	"time"

	"github.com/mcp-proxy/mcp-proxy/ratelimit"
)

// The sign-in throttle: one bucket for the whole page, not one per
// address (an attacker has as many addresses as it likes, and a map of
// them would grow without bound). A wrong token takes a place from it; a
// right one gives its place back. While the bucket is empty, a token that
// is not the status token is not checked at all: the answer is 429 with
// Retry-After. The status token is still taken (it is 256 random bits,
// which no guessing finds), so a flood of wrong tokens does not lock its
// holder out.
const (
	// signInBurst wrong tokens are answered at once: a person's typos.
	signInBurst = 5
	// signInPerMinute is the pace of wrong tokens after the burst: at five
	// a minute, guessing a metrics token of 8 random lowercase letters
	// (26^8) takes some 40,000 years on average.
	signInPerMinute = 5
)

// Outcomes of a sign-in, the values Options.OnSignIn is called with (the
// result label of mcp_proxy_status_sign_ins_total).
const (
	SignInOK         = "ok"
	SignInWrongToken = "wrong_token"
	SignInThrottled  = "throttled"
)

// checkToken reports whether tok signs in, through the throttle; when the
// throttle refuses, wait is how long until it takes a token again. Each
// outcome is counted (OnSignIn) and a wrong token is logged, without
// itself (the throttle bounds those lines).
func (h *Handler) checkToken(r *http.Request, tok string) (ok bool, wait time.Duration) {
	now := h.opts.Now()
	took, wait := h.signIns.Take(now)
	switch {
	case !took && h.access.isPageToken(tok):
		h.counted(SignInOK)
		return true, 0
	case !took:
		h.counted(SignInThrottled)
		return false, wait
	case h.access.validToken(tok):
		h.signIns.Give(now)
		h.counted(SignInOK)
		return true, 0
	}
	h.counted(SignInWrongToken)
	h.opts.Logger.Warn().Str("component", "status").Str("remote", r.RemoteAddr).Msg("status page: a wrong token was entered")
	return false, 0
}

func (h *Handler) counted(result string) {
	if h.opts.OnSignIn != nil {
		h.opts.OnSignIn(result)
	}
}

func newSignInBucket(now time.Time) *ratelimit.Bucket {
	return ratelimit.NewBucket(signInPerMinute, signInBurst, now)
}

// throttled answers a sign-in the throttle refused: 429, Retry-After in
// whole seconds, and the form.
func (h *Handler) throttled(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	h.render(w, http.StatusTooManyRequests, "message.html", messageData{Nonce: nonceOf(r), Title: "Sign in",
		Message: "Too many wrong tokens were entered: try again in " + strconv.Itoa(secs) + " s. The address with the status page's token (`mcp-proxy status url`) still signs in.",
		SignIn:  h.access.canSignIn(), CSRF: h.access.csrf(h.access.seed(w, r))})
}
