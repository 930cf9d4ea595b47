package upstream

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The stderr tail of a stdio child: its last lines go into the error of a
// connection that ended because the child exited or closed its stdout, so
// "process exited with status 1" says why (an npx package that does not
// exist, a missing variable) without a look at the log. Bounded, because the
// text ends up in errors shown to users and models.
const (
	// stderrTailLines is how many of the child's last stderr lines are kept.
	stderrTailLines = 5
	// stderrTailLineRunes cuts each kept line.
	stderrTailLineRunes = 200
	// stderrTailRunes bounds the joined tail; its end (the latest text) is
	// kept. The whole error text is cut at 500 characters (docs/protocol.md#errors), and
	// this leaves room for the status and the wrapping.
	stderrTailRunes = 300
	// stderrTailGrace is how long a session whose child exited waits for the
	// child's last stderr lines to be read before it dies. The pipe is
	// usually drained within microseconds; a grandchild that keeps it open
	// must not delay the failure of the requests in flight for long.
	stderrTailGrace = 50 * time.Millisecond
)

// stderrTailCauses is how many error lines (see looksLikeError) of the
// child's last moments are kept apart from the last lines: the first ones
// written within stderrTailCauseWindow before its last line. A child that
// fails at start usually names its cause first and then writes more: npx
// writes `npm error code E404` and `npm error 404 Not Found - GET <url of
// the package>`, then eleven lines of help, notices and a log path, which
// would push the cause out of the last lines.
const stderrTailCauses = 2

// stderrTailCauseWindow bounds how long before the child's last stderr
// line a cause line may have been written. A failure at start writes its
// cause and its end within a moment; a server that logged `Error: rate
// limited` an hour ago and then crashed did not end of that error, and its
// end is told by its last lines (and the first error lines of its crash).
const stderrTailCauseWindow = 10 * time.Second

// stderrTailErrLines is how many of the latest error lines are kept to find
// the causes among them: enough for npx's output (nine error lines) and a
// short burst before it.
const stderrTailErrLines = 16

// stderrTailCauseRunes bounds the cause lines in the joined text, so that
// the last lines keep at least the rest of stderrTailRunes.
const stderrTailCauseRunes = 160

// stderrTail keeps a child's last stderr lines and its latest error lines,
// already sanitized. Safe for concurrent use; the zero value is ready.
type stderrTail struct {
	// now is the clock (nil: time.Now); tests set it.
	now func() time.Time

	mu    sync.Mutex
	lines [stderrTailLines]string
	n     int       // lines added so far
	last  time.Time // when the last line was added
	// errs are the latest stderrTailErrLines lines that look like an
	// error, in a ring; nErr is how many were added.
	errs [stderrTailErrLines]errLine
	nErr int
}

// errLine is one stderr line that looks like an error, with its number
// among all the lines and when it was added.
type errLine struct {
	text string
	at   int
	when time.Time
}

// add records one sanitized, non-empty line.
func (t *stderrTail) add(line string) {
	if utf8.RuneCountInString(line) > stderrTailLineRunes {
		line = string([]rune(line)[:stderrTailLineRunes-1]) + "…"
	}
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	when := now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if looksLikeError(line) {
		t.errs[t.nErr%stderrTailErrLines] = errLine{text: line, at: t.n, when: when}
		t.nErr++
	}
	t.lines[t.n%stderrTailLines] = line
	t.n++
	t.last = when
}

// errorWords mark a line that states a failure, in the words of the tools
// that start MCP servers (npm's "npm error", "npm ERR!", Python's
// "Traceback" and "...Error:", Go's "panic:", Node's "Error:").
var errorWords = []string{"error", "err!", "fatal", "panic:", "traceback", "exception", "not found"}

// looksLikeError reports whether line states a failure (case-insensitive).
func looksLikeError(line string) bool {
	l := strings.ToLower(line)
	for _, w := range errorWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// text is what the child's stderr says of its end, at most stderrTailRunes:
// the causes, the first lines that look like an error among those written
// within stderrTailCauseWindow before the last line (when they are no
// longer among the last lines; cut to stderrTailCauseRunes), then " | … | ",
// then the last lines, oldest first, cut at the front. Lines are joined by
// " | "; "" when the child wrote nothing.
func (t *stderrTail) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := max(0, t.n-stderrTailLines)
	parts := make([]string, 0, t.n-first)
	for i := first; i < t.n; i++ {
		parts = append(parts, t.lines[i%stderrTailLines])
	}
	var causes []string
	lastCause := 0
	since := t.last.Add(-stderrTailCauseWindow)
	for i := max(0, t.nErr-stderrTailErrLines); i < t.nErr && len(causes) < stderrTailCauses; i++ {
		e := t.errs[i%stderrTailErrLines]
		if e.at < first && !e.when.Before(since) {
			causes = append(causes, e.text)
			lastCause = e.at
		}
	}
	budget := stderrTailRunes
	head := ""
	if len(causes) > 0 {
		head = cutEnd(strings.Join(causes, " | "), stderrTailCauseRunes)
		if lastCause < first-1 {
			head += " | … | " // lines were left out between
		} else {
			head += " | "
		}
		budget -= utf8.RuneCountInString(head)
	}
	return head + cutFront(strings.Join(parts, " | "), budget)
}

// cutEnd cuts s to n runes, the last being "…" when anything went.
func cutEnd(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// cutFront cuts s to n runes, keeping its end, the first being "…" when
// anything went.
func cutFront(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return "…" + string(r[len(r)-n+1:])
	}
	return s
}

// withTail adds the child's last stderr lines to err, the reason its
// session ended; errors.Is still sees err.
func (t *stderrTail) withTail(err error) error {
	if s := t.text(); s != "" {
		return fmt.Errorf("%w; last stderr: %s", err, s)
	}
	return err
}
