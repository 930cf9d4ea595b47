//go:build chromium

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// This file needs Chromium (Debian's chromium package), so it is built only
// with the build tag chromium:
//
//	go test -race -count=1 -tags chromium -run TestStatusPageBrowser ./integration/
//
// .ci/run installs chromium and runs that command. Without Chromium the
// test fails and says so; it never skips.

// statusScreenshot, when set, is where TestStatusPageBrowser also writes its
// screenshot (the README's is made with -status-screenshot
// ../docs/status-page.png).
var statusScreenshot = flag.String("status-screenshot", "", "TestStatusPageBrowser: also write the page's screenshot to this PNG file")

const (
	// statusPageToken is the scenario's metrics.tokens entry, typed into
	// the page's token form.
	statusPageToken = "status-page-token-7c2d9e41"
	// browserStep bounds one browser action (a page load, a click that
	// navigates) on a loaded machine.
	browserStep = 30 * time.Second
	// debianChromium is where Debian's chromium package puts the browser.
	debianChromium = "/usr/bin/chromium"
)

// chromiumPath finds the browser, or fails the test saying how to get it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if st, err := os.Stat(debianChromium); err == nil && st.Mode()&0o111 != 0 {
		return debianChromium
	}
	t.Fatal("chromium not installed: run .ci/run (apt-get install -y --no-install-recommends chromium)")
	return ""
}

// newChromium starts headless Chromium with a new empty profile; it is
// stopped when the test ends.
func newChromium(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser; it must not run under a
	// timeout, which would stop the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath(t), err)
	}
	return ctx
}

// step runs browser actions within browserStep.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// navigateBy runs actions that make the browser load another page (a
// click on a form's button) and waits until it has loaded.
func navigateBy(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	if _, err := chromedp.RunResponse(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// seen is the visible text of the element sel, white space collapsed; ""
// when the element is not there within 5 s (every caller expects it there:
// the bound is for a browser slow to answer on a loaded machine).
func seen(ctx context.Context, sel string) string {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(text), " ")
}

// waitSeen loads the page again until the text of sel satisfies ok.
func waitSeen(t *testing.T, ctx context.Context, url, sel, what string, ok func(string) bool) string {
	t.Helper()
	var text string
	if !sfWaitFor(figuresDeadline, func() bool {
		step(t, ctx, "loading the status page", chromedp.Navigate(url))
		text = seen(ctx, sel)
		return ok(text)
	}) {
		t.Fatalf("the page never showed %s; %s reads %q", what, sel, text)
	}
	return text
}

// TestStatusPageBrowser uses the status page as a person would, in
// headless Chromium, against the real binary: it signs in with the metrics
// token (the action forms appear once the page's script has the action
// key of the sign-in's redirect), sees a connected, a failed and a needs_auth server with the calls
// of the last minutes and a quarantined tool, takes a screenshot, reads the
// tool's diff, logs in to the OAuth server and sees it connect, then
// approves the tool and sees it leave the quarantine and come back to
// tools/list.
//
// The OAuth server is the MCP conformance suite's client scenario
// auth/metadata-default (its protected resource metadata, RFC 8414
// metadata at the root, dynamic client registration): the suite's
// authorization server approves at once and sends the browser back to the
// page's /auth/callback. The scenario's test-tool is called through the
// proxy, and the scenario's own checks (PKCE, the registration, the
// redirect to the page, the token in use) must pass.
func TestStatusPageBrowser(t *testing.T) {
	auth := startHandoffScenario(t, "auth/metadata-default")
	s := startStatusScenarioAt(t, auth.url, statusPageToken)
	s.callsAndRugPull(t)
	ctx := newChromium(t)

	// Sign in with the token.
	step(t, ctx, "opening the page", chromedp.Navigate(s.pageURL), chromedp.WaitVisible(chromedp.ID("token")))
	if got := seen(ctx, "#message"); got != "Enter a token of metrics.tokens, or the status page's own token (mcp-proxy status token), to see the status page." {
		t.Errorf("before signing in the page says %q", got)
	}
	step(t, ctx, "typing the token", chromedp.SendKeys(chromedp.ID("token"), statusPageToken))
	navigateBy(t, ctx, "signing in", chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	if msg := seen(ctx, "body"); !strings.HasPrefix(msg, "mcp-proxy status") {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("signing in ended at %s showing %q", loc, msg)
	}
	step(t, ctx, "seeing the page", chromedp.WaitVisible(chromedp.ID("servers")))
	// The sign-in answered 303 to /#act=<action key>: the page's script
	// kept the key in the tab's sessionStorage, took it off the address,
	// and showed the action forms (Log in and Approve, clicked below).
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); loc != s.pageURL {
		t.Errorf("after signing in the address is %q, want %q", loc, s.pageURL)
	}
	// The page reloads itself (its few lines of script): the time in its
	// header moves on without the test navigating.
	asOf := seen(ctx, "header")
	if !sfWaitFor(figuresDeadline, func() bool { now := seen(ctx, "header"); return now != "" && now != asOf }) {
		t.Errorf("the page did not reload by itself: its header still reads %q", asOf)
	}

	// The states, once the window has the calls.
	fx := waitSeen(t, ctx, s.pageURL, "#server-fx", "fx's calls", func(row string) bool {
		return strings.HasPrefix(row, "fx connected stdio 2025-11-25 15 1 1 5 0 1 ")
	})
	if !strings.HasSuffix(fx, " ms") {
		t.Errorf("fx row %q: no p95", fx)
	}
	if row := seen(ctx, "#server-broken"); !strings.HasPrefix(row, "broken failed next attempt in") && !strings.HasPrefix(row, "broken parked next attempt in") ||
		!strings.Contains(row, "last error: process exited with status 1; last stderr: fixture: exit requested by -exit-at-start") {
		t.Errorf("broken row: %q", row)
	}
	if row := seen(ctx, "#server-secure"); !strings.HasPrefix(row, "secure needs_auth") || !strings.Contains(row, "OAuth (oauth): needs_login Log in") {
		t.Errorf("secure row: %q", row)
	}
	if agents := seen(ctx, "#agents"); !strings.Contains(agents, "default http 1") || !strings.Contains(agents, "default quarantined") {
		t.Errorf("agents: %q", agents)
	}
	if q := seen(ctx, "#quarantine"); !strings.Contains(q, "fx__echo (fx/echo)") || !strings.Contains(q, "Held because: changed") ||
		!strings.Contains(q, "hidden_markup quarantine description") {
		t.Errorf("quarantine: %q", q)
	}

	// Open the diff (which also holds the page's reload), then the
	// screenshot.
	step(t, ctx, "opening the diff", chromedp.Click(chromedp.CSS("#held-fx-echo summary")), chromedp.WaitVisible(chromedp.CSS("#held-fx-echo pre.diff")))
	if diff := seen(ctx, "#held-fx-echo pre.diff"); !strings.Contains(diff, `+ "description": "`+poisonedEcho+`",`) ||
		!strings.Contains(diff, `- "description": "Returns the given text.",`) {
		t.Errorf("diff: %q", diff)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil || img.Bounds().Dx() < 800 || img.Bounds().Dy() < 600 {
		t.Fatalf("screenshot: %v, %v", err, img)
	}
	path := filepath.Join(t.TempDir(), "status-page.png")
	if *statusScreenshot != "" {
		path = *statusScreenshot
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (%dx%d): %s", img.Bounds().Dx(), img.Bounds().Dy(), path)

	// Log in: the authorization server approves at once and sends the
	// browser back to /auth/callback, whose page goes back to the status
	// page.
	navigateBy(t, ctx, "logging in", chromedp.Click(chromedp.CSS(`button[aria-label="Log in: secure"]`)))
	if got := seen(ctx, "#message"); got != "Authorized secure; the proxy connects to it now." {
		t.Fatalf("after Log in the browser shows %q", got)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	if !strings.HasPrefix(loc, s.pageURL+"auth/callback?") {
		t.Errorf("the browser came back to %q", loc)
	}
	step(t, ctx, "going back to the page", chromedp.WaitVisible(chromedp.ID("servers")))
	waitSeen(t, ctx, s.pageURL, "#server-secure", "secure connected", func(row string) bool {
		return strings.HasPrefix(row, "secure connected OAuth (oauth): authorized, token expires in")
	})
	if notices := seen(ctx, "#notices-list"); !strings.Contains(notices, "Authorized secure; the proxy connects to it now.") {
		t.Errorf("recent actions: %q", notices)
	}

	// Approve the tool.
	step(t, ctx, "opening the diff again", chromedp.Click(chromedp.CSS("#held-fx-echo summary")))
	navigateBy(t, ctx, "approving fx/echo", chromedp.Click(chromedp.CSS(`button[aria-label="Approve: fx/echo"]`)))
	if q := seen(ctx, "#quarantine"); q != "Quarantined tools No tool is quarantined." {
		t.Errorf("quarantine after Approve: %q", q)
	}
	if notices := seen(ctx, "#notices-list"); !strings.Contains(notices, "Approved fx/echo: its definition sha256:") {
		t.Errorf("recent actions: %q", notices)
	}
	if row := seen(ctx, "#server-fx"); !strings.HasPrefix(row, "fx connected stdio 2025-11-25 16 1 0 ") {
		t.Errorf("fx row after Approve: %q", row)
	}
	if !sfWaitFor(callTimeout, func() bool { return hasName(toolNames(listTools(t, s.cs)), "fx__echo") }) {
		t.Error("fx__echo not listed again after Approve")
	}
	if !sfWaitFor(callTimeout, func() bool { return hasName(toolNames(listTools(t, s.cs)), "secure__test-tool") }) {
		t.Fatal("secure__test-tool not listed after the login")
	}
	if got := sfOK(t, s.cs, "secure__test-tool", map[string]any{}); got != "test" {
		t.Errorf("secure__test-tool = %q, want the scenario's \"test\"", got)
	}

	// The scenario judges what its servers saw.
	run := auth.finish(t)
	if run.ExitCode != 0 || !run.Result.Passed() {
		t.Fatalf("conformance scenario %s does not pass (runner exit %d):\n%s\nrunner output (tail):\n%s",
			auth.name, run.ExitCode, run.Result.Problems(), tail(run.Output, 3000))
	}
	seenChecks := map[string]bool{}
	for _, c := range run.Result.Checks {
		seenChecks[c.ID] = c.Status == "SUCCESS"
		if c.ID == "authorization-request" {
			var d struct {
				Query map[string]string `json:"query"`
			}
			if err := json.Unmarshal(c.Details, &d); err != nil || d.Query["redirect_uri"] != s.pageURL+"auth/callback" {
				t.Errorf("the authorization request's redirect_uri is %q, want the page's %q (%v)", d.Query["redirect_uri"], s.pageURL+"auth/callback", err)
			}
		}
	}
	for _, id := range []string{"client-registration", "authorization-request", "pkce-verifier-matches-challenge", "token-request", "valid-bearer-token"} {
		if !seenChecks[id] {
			t.Errorf("scenario %s has no successful %s check", auth.name, id)
		}
	}
	t.Logf("conformance scenario %s: %d checks passed (runner exit 0)", auth.name, run.Result.Count("SUCCESS"))
}
