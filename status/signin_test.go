package status

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/net/html"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

// anyCSRF is the value of the first csrf field on the page, whichever
// form holds it: reading the page hands it out.
func anyCSRF(t *testing.T, a answer) string {
	t.Helper()
	for _, in := range findAll(a.doc, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == csrfField }) {
		return attr(in, "value")
	}
	t.Fatalf("no csrf field on the page:\n%s", a.body)
	return ""
}

// TestReadingGivesNoAction is issue 35, item 1: without metrics.tokens,
// anyone who can open the page on the loopback listener gets its CSRF
// cookie and form token, and used to approve a quarantined tool with them.
// Now the page is read-only until the browser signs in with the status
// token: approve, keep and Log in are refused with the page's own CSRF
// cookie and token, nothing is approved, and the page has no action
// button, only the token form. Signed in with the status token, the same
// browser approves.
func TestReadingGivesNoAction(t *testing.T) {
	p := newPage(t, Options{})
	b := newBrowser(t, p.base)
	a := b.get("/")
	if a.code != http.StatusOK {
		t.Fatalf("GET / = %d", a.code)
	}
	csrf := anyCSRF(t, a)
	for _, path := range []string{"/tools/approve", "/tools/keep", "/auth/login"} {
		got := b.post(path, url.Values{"server": {"fx"}, "tool": {"echo"}, "fingerprint": {"sha256:81c38bc47a74aaaa"}, "csrf": {csrf}}, nil)
		if got.code != http.StatusForbidden || !strings.Contains(got.text("message"), "read-only until you sign in with its token") {
			t.Errorf("POST %s with the page's CSRF token, not signed in: %d %q", path, got.code, got.text("message"))
		}
	}
	if got := p.approvals(); len(got) != 0 {
		t.Fatalf("approved without the status token: %v", got)
	}
	if got := a.buttons(); !slices.Equal(got, []string{"Sign in"}) {
		t.Errorf("buttons of the page before signing in: %q", got)
	}
	if got := a.text("read-only"); !strings.Contains(got, "mcp-proxy status url") {
		t.Errorf("read-only note: %q", got)
	}
	if !strings.Contains(a.text("quarantine"), "Approve with mcp-proxy tools approve fx/echo") {
		t.Errorf("quarantine section before signing in: %q", a.text("quarantine"))
	}

	in := b.submit(a, "/login", nil, url.Values{"token": {testPageToken}})
	if in.code != http.StatusSeeOther || !toPageWithKey(in.header) {
		t.Fatalf("signing in with the form: %d %v", in.code, in.header)
	}
	a = b.get("/")
	if got := a.buttons(); !slices.Equal(got, []string{"Sign out", "Approve: fx/echo", "Keep quarantined: fx/echo"}) {
		t.Errorf("buttons signed in: %q", got)
	}
	if ok := b.submit(a, "/tools/approve", map[string]string{"tool": "echo"}, nil); ok.code != http.StatusSeeOther ||
		!slices.Equal(p.approvals(), []string{"fx/echo@sha256:81c38bc47a74aaaa"}) {
		t.Errorf("approve signed in: %d, approvals %v", ok.code, p.approvals())
	}
	// Signing out makes the page read-only again.
	b.submit(b.get("/"), "/logout", nil, nil)
	if got := b.get("/").buttons(); !slices.Equal(got, []string{"Sign in"}) {
		t.Errorf("buttons after signing out: %q", got)
	}
}

// TestSignInByAddress: the address with the status token sets the session
// cookie (HttpOnly, SameSite=Strict, path /, not the token) and answers
// 303 to / (the address bar keeps no token); a wrong token in the address
// is a 401 with the form that does not repeat it; with metrics.tokens the
// status token opens the page and its actions as well.
func TestSignInByAddress(t *testing.T) {
	p := newPage(t, Options{Tokens: []string{testToken}})
	b := newBrowser(t, p.base)
	in := b.get("/?token=" + testPageToken)
	if in.code != http.StatusSeeOther || !toPageWithKey(in.header) {
		t.Fatalf("GET /?token=: %d %v", in.code, in.header)
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: in.header}).Cookies() {
		if c.Name == sessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" ||
		session.Value == "" || strings.Contains(session.Value, testPageToken) {
		t.Fatalf("session cookie %+v", session)
	}
	a := b.get("/")
	if a.code != http.StatusOK || !slices.Contains(a.buttons(), "Approve: fx/echo") {
		t.Fatalf("page signed in by address: %d %q", a.code, a.buttons())
	}
	if strings.Contains(a.body, testPageToken) || strings.Contains(in.body, testPageToken) {
		t.Error("the status token reached a page")
	}

	wrong := newBrowser(t, p.base).get("/?token=not-the-token-" + testPageToken[:8])
	if wrong.code != http.StatusUnauthorized || wrong.text("message") != msgWrongToken || strings.Contains(wrong.body, "not-the-token") {
		t.Errorf("wrong token in the address: %d %q", wrong.code, wrong.text("message"))
	}
	// The status token in the Authorization header, as a metrics token,
	// opens the page and its actions (a script, not a browser).
	bearer := newBrowser(t, p.base)
	req, _ := http.NewRequest(http.MethodGet, p.base+"/", nil)
	req.Header.Set("Authorization", "Bearer "+testPageToken)
	a = bearer.do(req)
	if a.code != http.StatusOK || !strings.HasPrefix(a.text("server-fx"), "fx connected") {
		t.Fatalf("GET / with the status token as bearer: %d %q", a.code, a.text("server-fx"))
	}
	got := bearer.post("/tools/keep", url.Values{"server": {"fx"}, "tool": {"echo"}, "fingerprint": {"sha256:81c38bc47a74aaaa"}, csrfField: {anyCSRF(t, a)}},
		map[string]string{"Authorization": "Bearer " + testPageToken})
	if got.code != http.StatusSeeOther || got.header.Get("Location") != "/#quarantine" {
		t.Errorf("keep with the status token as bearer: %d %v", got.code, got.header)
	}
}

// lockedClock is a test clock safe for concurrent use.
type lockedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *lockedClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *lockedClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestSignInThrottle: the first wrong tokens are answered at once (401);
// then every token but the status token waits (429, Retry-After), the
// right metrics token included, until the throttle gives a place back
// (one every 12 s). Each outcome is counted; each wrong token is logged
// without itself, the throttled ones are not logged.
func TestSignInThrottle(t *testing.T) {
	c := &lockedClock{t: testNow}
	var mu sync.Mutex
	var counted []string
	var logs bytes.Buffer
	var logMu sync.Mutex
	p := newPage(t, Options{Tokens: []string{testToken}, Now: c.now,
		Logger: zerolog.New(lockedWriter{&logMu, &logs}),
		OnSignIn: func(result string) {
			mu.Lock()
			defer mu.Unlock()
			counted = append(counted, result)
		}})
	b := newBrowser(t, p.base)
	login := func(tok string) answer {
		t.Helper()
		return b.submit(b.get("/"), "/login", nil, url.Values{"token": {tok}})
	}
	for i := range signInBurst {
		if got := login("wrong-token-" + string(rune('a'+i))); got.code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, got.code)
		}
	}
	got := login(testToken)
	if got.code != http.StatusTooManyRequests || got.header.Get("Retry-After") != "12" ||
		!strings.HasPrefix(got.text("message"), "Too many wrong tokens were entered: try again in 12 s.") {
		t.Fatalf("the right metrics token while throttled: %d %q %q", got.code, got.header.Get("Retry-After"), got.text("message"))
	}
	if got := b.get("/?token=wrong-token-z"); got.code != http.StatusTooManyRequests {
		t.Errorf("a wrong token in the address while throttled: %d", got.code)
	}
	// The status token is still taken.
	if got := newBrowser(t, p.base).get("/?token=" + testPageToken); got.code != http.StatusSeeOther {
		t.Errorf("the status token while throttled: %d", got.code)
	}
	c.add(11 * time.Second)
	if got := login(testToken); got.code != http.StatusTooManyRequests || got.header.Get("Retry-After") != "1" {
		t.Errorf("11 s later: %d, Retry-After %q", got.code, got.header.Get("Retry-After"))
	}
	c.add(time.Second)
	if got := login(testToken); got.code != http.StatusSeeOther {
		t.Errorf("12 s later the right token: %d", got.code)
	}
	mu.Lock()
	want := []string{"wrong_token", "wrong_token", "wrong_token", "wrong_token", "wrong_token", "throttled", "throttled", "ok", "throttled", "ok"}
	if !slices.Equal(counted, want) {
		t.Errorf("counted %q, want %q", counted, want)
	}
	mu.Unlock()
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logs.String(), "status page: a wrong token was entered"); n != signInBurst {
		t.Errorf("%d lines about wrong tokens, want %d:\n%s", n, signInBurst, logs.String())
	}
	for _, secret := range []string{"wrong-token", testToken, testPageToken} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestReadOnlyWithoutAnyToken: with no status token (it could not be
// kept) and no metrics.tokens, the page is read-only with no form and
// says why; an action is refused.
func TestReadOnlyWithoutAnyToken(t *testing.T) {
	h := New(Options{State: sampleState, Now: func() time.Time { return testNow },
		Approve: func(string, string, string) error { t.Error("Approve called"); return nil }})
	srv := httptest.NewServer(httpguard.Rebinding(h))
	t.Cleanup(srv.Close)
	b := newBrowser(t, srv.URL)
	a := b.get("/")
	if a.code != http.StatusOK || len(a.buttons()) != 0 || !strings.Contains(a.text("read-only"), "it has no token") {
		t.Errorf("page without any token: %d %q %q", a.code, a.buttons(), a.text("read-only"))
	}
	got := b.post("/tools/approve", url.Values{"server": {"fx"}, "tool": {"echo"}, "fingerprint": {"sha256:81c38bc47a74aaaa"}, "csrf": {anyCSRFOrEmpty(a)}}, nil)
	if got.code != http.StatusForbidden || !strings.Contains(got.text("message"), "it has no token") {
		t.Errorf("approve without any token: %d %q", got.code, got.text("message"))
	}
	if got := b.post("/login", url.Values{"token": {"anything"}}, nil); got.code != http.StatusSeeOther {
		t.Errorf("sign in without any token: %d", got.code)
	}
}

func anyCSRFOrEmpty(a answer) string {
	for _, in := range findAll(a.doc, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == csrfField }) {
		return attr(in, "value")
	}
	return ""
}

// TestCookiesAloneDoNotAct: browsers send a host's cookies to every port
// of it, so another local user's server on 127.0.0.1:8000 receives the
// page's session and CSRF cookies when the signed-in browser opens one of
// its pages. Replayed, with the CSRF token of the page they open, they
// read the page but approve nothing: actions need the action key, which
// no cookie and no page holds. The browser that signed in still approves.
func TestCookiesAloneDoNotAct(t *testing.T) {
	for _, opts := range []Options{{}, {Tokens: []string{testToken}}} {
		p := newPage(t, opts)
		b := p.signedIn(t)
		a := b.get("/")
		if b.act == "" || !slices.Contains(a.buttons(), "Approve: fx/echo") {
			t.Fatalf("signed in: key %q, buttons %q", b.act, a.buttons())
		}
		u, _ := url.Parse(p.base)
		stolen := b.hc.Jar.Cookies(u) // what a server on another port of the host receives
		for _, c := range stolen {
			if strings.Contains(c.Value, b.act) || strings.Contains(c.Value, testPageToken) {
				t.Fatalf("cookie %s holds the action key or the token", c.Name)
			}
		}
		thief := newBrowser(t, p.base)
		thief.hc.Jar.SetCookies(u, stolen)
		page := thief.get("/")
		if page.code != http.StatusOK || strings.Contains(page.body, b.act) {
			t.Fatalf("the page read with the stolen cookies: %d, holds the action key: %v", page.code, strings.Contains(page.body, b.act))
		}
		for _, path := range []string{"/tools/approve", "/tools/keep"} {
			got := thief.submit(page, path, map[string]string{"tool": "echo"}, nil)
			if got.code != http.StatusForbidden || !strings.Contains(got.text("message"), "read-only until you sign in") {
				t.Errorf("tokens %v: POST %s with the stolen cookies: %d %q", opts.Tokens, path, got.code, got.text("message"))
			}
			got = thief.submit(page, path, map[string]string{"tool": "echo"}, url.Values{actionField: {"forged"}})
			if got.code != http.StatusForbidden {
				t.Errorf("tokens %v: POST %s with a forged key: %d", opts.Tokens, path, got.code)
			}
		}
		if got := p.approvals(); len(got) != 0 {
			t.Fatalf("tokens %v: approved with the stolen cookies: %v", opts.Tokens, got)
		}
		if got := b.submit(b.get("/"), "/tools/approve", map[string]string{"tool": "echo"}, nil); got.code != http.StatusSeeOther ||
			!slices.Equal(p.approvals(), []string{"fx/echo@sha256:81c38bc47a74aaaa"}) {
			t.Errorf("tokens %v: approve by the browser that signed in: %d %v", opts.Tokens, got.code, p.approvals())
		}
	}
}

// TestSignInAddressFromAnotherSite: a sign-in address that another site's
// page asks for (an <img> in a loop; another port of the host is the same
// site) is refused before its token is checked: it takes nothing from the
// throttle and is not counted, so the holder of a metrics token still
// signs in at once. Opened directly (Sec-Fetch-Site none, or none at all
// as from curl) it signs in.
func TestSignInAddressFromAnotherSite(t *testing.T) {
	var mu sync.Mutex
	var counted []string
	p := newPage(t, Options{Tokens: []string{testToken}, OnSignIn: func(r string) { mu.Lock(); defer mu.Unlock(); counted = append(counted, r) }})
	b := newBrowser(t, p.base)
	for i := range 3 * signInBurst {
		for _, site := range []string{"cross-site", "same-site"} {
			req, _ := http.NewRequest(http.MethodGet, p.base+"/?token=wrong-"+strconv.Itoa(i), nil)
			req.Header.Set("Sec-Fetch-Site", site)
			if got := b.do(req); got.code != http.StatusForbidden || got.text("message") != msgNotDirect {
				t.Fatalf("sign-in address from a %s page: %d %q", site, got.code, got.text("message"))
			}
		}
	}
	req, _ := http.NewRequest(http.MethodGet, p.base+"/?token="+testPageToken, nil)
	req.Header.Set("Sec-Fetch-Site", "same-site")
	if got := b.do(req); got.code != http.StatusForbidden || b.act != "" {
		t.Errorf("the status token in an address from a same-site page: %d", got.code)
	}
	if got := b.submit(b.get("/"), "/login", nil, url.Values{"token": {testToken}}); got.code != http.StatusSeeOther {
		t.Errorf("the metrics token after the flood: %d", got.code)
	}
	for _, site := range []string{"none", "same-origin"} {
		req, _ := http.NewRequest(http.MethodGet, p.base+"/?token="+testToken, nil)
		req.Header.Set("Sec-Fetch-Site", site)
		if got := newBrowser(t, p.base).do(req); got.code != http.StatusSeeOther || !toPageWithKey(got.header) {
			t.Errorf("sign-in address with Sec-Fetch-Site %s: %d", site, got.code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{SignInOK, SignInOK, SignInOK}; !slices.Equal(counted, want) {
		t.Errorf("counted %q, want %q", counted, want)
	}
}
