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

// stderrTail keeps a child's last stderr lines, already sanitized. Safe for
// concurrent use; the zero value is ready.
type stderrTail struct {
	mu    sync.Mutex
	lines [stderrTailLines]string
	n     int // lines added so far
}

// add records one sanitized, non-empty line.
func (t *stderrTail) add(line string) {
	if utf8.RuneCountInString(line) > stderrTailLineRunes {
		line = string([]rune(line)[:stderrTailLineRunes-1]) + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines[t.n%stderrTailLines] = line
	t.n++
}

// text is the kept lines, oldest first, joined by " | " and cut at the
// front to stderrTailRunes; "" when the child wrote nothing.
func (t *stderrTail) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := max(0, t.n-stderrTailLines)
	parts := make([]string, 0, t.n-first)
	for i := first; i < t.n; i++ {
		parts = append(parts, t.lines[i%stderrTailLines])
	}
	s := strings.Join(parts, " | ")
	if r := []rune(s); len(r) > stderrTailRunes {
		s = "…" + string(r[len(r)-stderrTailRunes+1:])
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
