package status

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// pageData is the data of page.html.
type pageData struct {
	Nonce   string
	Version string
	Now     time.Time
	Refresh int // seconds
	CSRF    string
	// Actions: buttons are shown; otherwise ReadOnly says why not, and
	// SignIn shows the token form.
	Actions  bool
	ReadOnly string
	SignIn   bool
	// SignedIn: the page was opened with the session cookie (Sign out).
	SignedIn bool

	Span     time.Duration // of the window figures; 0: none yet
	Servers  []serverView
	Sessions []SessionCount
	Denials  []DenialCount
	Held     []heldView
	Review   int // held tools not yet kept
	Findings []ToolFindings
	Notices  []notice
}

type serverView struct {
	Server
	Figures ServerFigures
	// Login: the Log in button is offered.
	Login bool
}

type heldView struct {
	HeldTool
	Kept bool
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has(TokenParam) {
		if !directNavigation(r) {
			h.render(w, http.StatusForbidden, "message.html", messageData{Nonce: nonceOf(r), Title: "Sign in", Message: msgNotDirect,
				SignIn: h.access.canSignIn(), CSRF: h.access.csrf(h.access.seed(w, r)), Back: true})
			return
		}
		h.signInWith(w, r, q.Get(TokenParam))
		return
	}
	if !h.access.authorized(r) {
		h.refuse(w, r, msgSignInToSee)
		return
	}
	st := h.opts.State()
	sc := h.scrubber()
	d := pageData{
		Nonce: nonceOf(r), Version: h.opts.Version, Now: h.opts.Now(), Refresh: refreshSeconds,
		Actions:  h.access.canSignIn(),
		SignedIn: h.access.hasSession(r),
		CSRF:     h.access.csrf(h.access.seed(w, r)),
		Findings: cleanFindings(sc, st.Findings),
		Notices:  h.recentNotices(),
	}
	d.ReadOnly, d.SignIn = h.readOnlyReason(), h.access.canSignIn()
	var fig Figures
	if h.opts.Window != nil {
		fig = h.opts.Window.Figures()
	}
	d.Span, d.Sessions, d.Denials = fig.Span, fig.Sessions, fig.Denials
	for _, s := range st.Servers {
		s.Error = sanitize.Error(sc.Text(s.Error))
		d.Servers = append(d.Servers, serverView{Server: s, Figures: fig.Servers[s.Name],
			Login: d.Actions && h.opts.BeginLogin != nil && s.State == "needs_auth" && s.Auth != nil && s.Auth.Browser})
	}
	h.mu.Lock()
	kept := map[string]string{}
	for _, t := range st.Held {
		k := t.Server + "/" + t.Tool
		if fp, ok := h.kept[k]; ok && fp == t.Fingerprint {
			kept[k] = fp
		}
	}
	h.kept = kept // forget tools released or changed again
	h.mu.Unlock()
	for _, t := range st.Held {
		t.Diff = sc.Text(cutDiff(t.Diff))
		t.Hint = sc.Text(t.Hint)
		t.Findings = cleanFindingList(sc, t.Findings)
		v := heldView{HeldTool: t, Kept: kept[t.Server+"/"+t.Tool] != ""}
		if !v.Kept {
			d.Review++
		}
		d.Held = append(d.Held, v)
	}
	h.render(w, http.StatusOK, "page.html", d)
}

// msgNotDirect answers a sign-in address that another site's page asked
// for (a link, an image, a script).
const msgNotDirect = "A sign-in address works only when it is opened directly (pasted into the address bar or opened from a terminal), " +
	"not from another site's page; its token was not checked."

// directNavigation reports whether r was not made by another site's page,
// as far as the browser says (Sec-Fetch-Site: none or same-origin; tools
// such as curl send none). The sign-in address is refused otherwise
// before its token is checked, so that another page (an <img> in a loop)
// cannot empty the sign-in throttle and lock the holders of
// metrics.tokens out; another port of the host is the same site but not
// the same origin, and is refused too.
func directNavigation(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
		return true
	}
	return false
}

// cutDiff bounds a diff to maxDiffBytes, on a line boundary.
func cutDiff(diff string) string {
	if len(diff) <= maxDiffBytes {
		return diff
	}
	cut := strings.LastIndexByte(diff[:maxDiffBytes], '\n') + 1
	return diff[:cut] + "… (cut; mcp-proxy tools diff prints it whole)\n"
}

func cleanFindings(sc *sanitize.Scrubber, in []ToolFindings) []ToolFindings {
	out := make([]ToolFindings, len(in))
	for i, t := range in {
		out[i] = t
		out[i].Findings = cleanFindingList(sc, t.Findings)
	}
	return out
}

// cleanFindingList returns a copy of fs with their excerpts cleaned (they
// are cleaned for logs already; the config's secrets are removed here).
func cleanFindingList(sc *sanitize.Scrubber, fs []integrity.Finding) []integrity.Finding {
	out := make([]integrity.Finding, len(fs))
	for i, f := range fs {
		out[i] = f
		out[i].Excerpt = sc.Text(f.Excerpt)
	}
	return out
}

// funcs are the templates' helpers; now is the page's clock.
func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		// clock is a time as UTC hours, minutes and seconds, with the date
		// when it is not today's.
		"clock": func(t time.Time) string {
			t, n := t.UTC(), now().UTC()
			if t.YearDay() == n.YearDay() && t.Year() == n.Year() {
				return t.Format("15:04:05") + " UTC"
			}
			return t.Format("2006-01-02 15:04:05") + " UTC"
		},
		// until is the time from now to t, rounded ("in 12s", "3m ago").
		"until": func(t time.Time) string {
			d := t.Sub(now())
			switch {
			case d >= 0:
				return "in " + roundDuration(d)
			default:
				return roundDuration(-d) + " ago"
			}
		},
		"span":    roundDuration,
		"latency": latency,
		"count":   func(n int64) string { return fmt.Sprint(n) },
		"isZero":  func(t time.Time) bool { return t.IsZero() },
		"join": func(rs []integrity.Reason) string {
			out := make([]string, len(rs))
			for i, r := range rs {
				out[i] = string(r)
			}
			return strings.Join(out, ", ")
		},
		"short": integrity.ShortFingerprint,
		// diffClass is the class of one line of a unified diff.
		"diffLines": diffLines,
	}
}

// roundDuration writes d to the second (to the minute beyond an hour).
func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// latency writes a p95: milliseconds below ten seconds, else seconds.
func latency(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

// diffLine is one line of a diff with its kind: add, del, hunk or ctx.
type diffLine struct {
	Kind, Text string
}

func diffLines(diff string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		kind := "ctx"
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			kind = "file"
		case strings.HasPrefix(l, "@@"):
			kind = "hunk"
		case strings.HasPrefix(l, "+"):
			kind = "add"
		case strings.HasPrefix(l, "-"):
			kind = "del"
		}
		out = append(out, diffLine{Kind: kind, Text: l})
	}
	return out
}
