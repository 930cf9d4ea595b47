package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calls ride out a short upstream restart (issue 20, docs/operations.md#reconnection reconnect_wait):
// many HTTP sessions call a tool of a stdio upstream in a loop while the
// upstream process exits once, then while it crash-loops.

// Shape of the load.
const (
	rwSessions   = 50 // HTTP sessions calling in a loop
	rwSleepers   = 5  // of which call fx__sleep, so calls are in flight at the crash
	rwSleepMS    = 200
	rwTimeout    = 3 * time.Second // the server's timeout: shorter than the window
	rwWindow     = 5 * time.Second // reconnect_wait (the default)
	rwLoopWarmup = 300 * time.Millisecond
	// rwSlack is what a call may take beyond its bound on a loaded 2-core
	// machine under the race detector, with the whole suite running: the
	// HTTP round trips of 50 sessions, scheduling. Only gross overruns
	// (a wait that ignored its bound) fail the test on the client's clock;
	// the bounds themselves are checked on the proxy's own account of each
	// wait ("the request waited 2.31s"), which the load does not blur.
	rwSlack = 5 * time.Second
	// rwProxySlack is what the proxy's own account of a wait may exceed its
	// bound by: the wake-up after the timer fired.
	rwProxySlack = 250 * time.Millisecond
)

// rwWaited is the wait a refusal reports ("the request waited 4.998s and
// was not sent"); ok is false when it reports none (refused at once).
func rwWaited(msg string) (time.Duration, bool) {
	m := waitedRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	return d, err == nil
}

var waitedRE = regexp.MustCompile(`the request waited (\S+) and was not sent`)

// rwCall is one finished call of the load.
type rwCall struct {
	start, end time.Time
	outcome    string // ok, refused, lost, timeout, other
	msg        string
}

func (c rwCall) took() time.Duration { return c.end.Sub(c.start) }

// rwLoad runs the calling sessions and records every call.
type rwLoad struct {
	mu    sync.Mutex
	calls []rwCall
	stop  chan struct{}
	wg    sync.WaitGroup
}

// classify sorts a call's result by what the client saw.
func rwClassify(res *mcp.CallToolResult, err error, want string) (string, string) {
	if err == nil {
		if res.IsError || contentText(res) != want {
			return "other", rsJSON(res)
		}
		return "ok", ""
	}
	w := rsRPCError(err)
	switch {
	case w == nil:
		return "other", err.Error()
	case strings.Contains(w.Message, "was lost during the call"):
		return "lost", w.Message
	case strings.Contains(w.Message, "is not connected"):
		return "refused", w.Message
	case strings.Contains(w.Message, "timed out"):
		return "timeout", w.Message
	}
	return "other", fmt.Sprintf("%d %s", w.Code, w.Message)
}

func startLoad(t *testing.T, url string) *rwLoad {
	l := &rwLoad{stop: make(chan struct{})}
	sessions := make([]*mcp.ClientSession, rwSessions)
	for i := range sessions {
		sessions[i] = sdkHTTP(t, url, nil, nil)
	}
	for i, cs := range sessions {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				tool, text := "fx__echo", fmt.Sprintf("s%d-%d", i, n)
				args := map[string]any{"text": text}
				if i < rwSleepers {
					tool, text, args = "fx__sleep", "slept", map[string]any{"ms": rwSleepMS}
				}
				start := time.Now()
				res, err := rsCall(cs, tool, args, 4*rwWindow)
				outcome, msg := rwClassify(res, err, text)
				l.mu.Lock()
				l.calls = append(l.calls, rwCall{start: start, end: time.Now(), outcome: outcome, msg: msg})
				l.mu.Unlock()
				if outcome != "ok" {
					time.Sleep(20 * time.Millisecond) // a failing server is not hammered
				}
			}
		}()
	}
	time.Sleep(rwLoopWarmup)
	return l
}

// finish stops the loops and returns every call.
func (l *rwLoad) finish() []rwCall {
	close(l.stop)
	l.wg.Wait()
	return l.calls
}

// rwLost counts the calls reported lost that were in flight at the crash:
// sent before the proxy saw the process exit (seen), still running when
// the crash was asked for (asked). The calls of the sleeping sessions run
// in step, so at the instant the crash is asked for they may all be
// between two calls, and the next ones, sent a moment later, are the ones
// the crash takes.
func rwLost(calls []rwCall, asked, seen time.Time) int {
	n := 0
	for _, c := range calls {
		if c.outcome == "lost" && c.start.Before(seen) && c.end.After(asked) {
			n++
		}
	}
	return n
}

// rwBusy counts the calls under way at some moment of [from, to).
func rwBusy(calls []rwCall, from, to time.Time) int {
	n := 0
	for _, c := range calls {
		if c.start.Before(to) && c.end.After(from) {
			n++
		}
	}
	return n
}

// rwSummary counts outcomes of the calls that started in [from, to) and
// gives their p99 and maximum latency.
func rwSummary(calls []rwCall, from, to time.Time) (n int, by map[string]int, p99, worst time.Duration) {
	by = map[string]int{}
	var d []time.Duration
	for _, c := range calls {
		if c.start.Before(from) || !c.start.Before(to) {
			continue
		}
		n++
		by[c.outcome]++
		d = append(d, c.took())
	}
	if len(d) == 0 {
		return 0, by, 0, 0
	}
	slices.Sort(d)
	return n, by, d[(len(d)*99)/100], d[len(d)-1]
}

// TestReconnectWaitUnderLoad: 50 HTTP sessions call fx__echo in a loop.
// The upstream exits once: the call in flight on it is reported lost, and
// no call is refused, since the restart (about 1 s) completes within
// reconnect_wait; no call takes longer than its timeout. Then the upstream
// crash-loops: calls wait at most until the window closes or their own
// timeout, and afterwards fail at once, saying why and when the next attempt
// is.
func TestReconnectWaitUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flag := filepath.Join(dir, "crash-loop")
	// The wrapper exits at start while the flag file exists: a crash loop.
	script := `if [ -e "$1" ]; then echo "fixture refuses to start: crash loop" >&2; exit 1; fi; exec "$2" -no-weird -name fx`
	cfg := writeConfig(t, "",
		stdioServer("fx", "/bin/sh", []string{"-c", script, "sh", flag, fixtureBin},
			fmt.Sprintf("timeout: %s", rwTimeout), fmt.Sprintf("reconnect_wait: %s", rwWindow)))
	url, proxy := startHTTPProxy(t, cfg)
	control := sdkHTTP(t, url, nil, nil)
	rsWaitListed(t, control, callTimeout, "fx__echo", "fx__crash")

	// A single restart.
	load := startLoad(t, url)
	crashed := time.Now()
	_, crashErr := rsCall(control, "fx__crash", nil, callTimeout)
	crashSeen := time.Now() // the proxy has seen the process exit
	var back time.Time
	for deadline := time.Now().Add(20 * time.Second); back.IsZero(); {
		if res, err := rsCall(control, "fx__echo", map[string]any{"text": "back"}, callTimeout); err == nil && contentText(res) == "back" {
			back = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("fx did not answer within 20s of its crash: %v", err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	calls := load.finish()
	n, by, p99, worst := rwSummary(calls, crashed, back)
	t.Logf("MEASURE single restart: upstream back %s after the crash; %d calls in flight at the crash reported lost; %d calls started meanwhile: %d ok, %d refused, %d lost, %d timeout, %d other; p99 %s, max %s; %d calls in all",
		back.Sub(crashed).Round(time.Millisecond), rwLost(calls, crashed, crashSeen), n, by["ok"], by["refused"], by["lost"], by["timeout"], by["other"],
		p99.Round(time.Millisecond), worst.Round(time.Millisecond), len(calls))
	if w := rsRPCError(crashErr); w == nil || !strings.Contains(w.Message, "was lost during the call; it was not retried") {
		t.Errorf("the crash call: %v, want it reported lost", crashErr)
	}
	// The sleep calls in flight at the crash are lost too, never replayed.
	if lost := rwLost(calls, crashed, crashSeen); lost == 0 {
		t.Errorf("no call in flight at the crash was reported lost; %d sessions were sleeping %dms", rwSleepers, rwSleepMS)
	}
	// Every session should have had a call under way during the restart:
	// one it started then, or one from before that waited through it (on
	// a loaded machine most of them do not start another until it ends).
	if busy := rwBusy(calls, crashed, back); busy < rwSessions {
		t.Errorf("only %d calls were under way during the restart (%d started in it); the load means nothing", busy, n)
	}
	if back.Sub(crashed) > rwWindow-time.Second {
		t.Errorf("the restart took %s: the test needs it well within reconnect_wait (%s)", back.Sub(crashed), rwWindow)
	}
	var bad []string
	for _, c := range calls {
		switch {
		case c.outcome == "lost" && c.start.After(crashSeen):
			bad = append(bad, fmt.Sprintf("call at +%s lost: it can only have been sent after the restart: %s", c.start.Sub(crashed).Round(time.Millisecond), c.msg))
		case c.outcome == "refused" || c.outcome == "other" || c.outcome == "timeout":
			bad = append(bad, fmt.Sprintf("call at +%s (took %s): %s: %s", c.start.Sub(crashed).Round(time.Millisecond), c.took().Round(time.Millisecond), c.outcome, c.msg))
		case c.took() > rwTimeout+rwSlack:
			bad = append(bad, fmt.Sprintf("call at +%s took %s, beyond its %s timeout", c.start.Sub(crashed).Round(time.Millisecond), c.took(), rwTimeout))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d calls failed or took too long across a single restart, want none; the first ones:\n%s", len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
	if t.Failed() {
		t.Logf("proxy log:\n%s", tail(proxy.stderr.String(), 3000))
		return
	}

	// A crash loop: every restart fails within the window.
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	load = startLoad(t, url)
	crashed = time.Now()
	_, _ = rsCall(control, "fx__crash", nil, callTimeout)
	crashSeen = time.Now()
	time.Sleep(rwWindow + 3*time.Second)
	calls = load.finish()
	windowEnd := crashed.Add(rwWindow)
	n, by, p99, worst = rwSummary(calls, crashed, windowEnd)
	t.Logf("MEASURE crash loop, within the window: %d calls: %d ok, %d refused, %d lost, %d timeout, %d other; p99 %s, max %s",
		n, by["ok"], by["refused"], by["lost"], by["timeout"], by["other"], p99.Round(time.Millisecond), worst.Round(time.Millisecond))
	// The window opens when the proxy sees the drop, which is about when
	// the crash call fails (crashSeen): the supervisor publishes it right
	// after the session dies, though on a loaded machine a moment may pass.
	afterWindow := crashSeen.Add(rwWindow + time.Second)
	nAfter, byAfter, p99After, worstAfter := rwSummary(calls, afterWindow, crashed.Add(rwWindow+3*time.Second))
	t.Logf("MEASURE crash loop, after the window: %d calls: %d refused, %d other; p99 %s, max %s",
		nAfter, byAfter["refused"], byAfter["other"], p99After.Round(time.Millisecond), worstAfter.Round(time.Millisecond))
	bad = nil
	for _, c := range calls {
		if c.start.Before(crashed) {
			continue
		}
		waited, didWait := rwWaited(c.msg)
		switch {
		case c.took() > rwTimeout+rwSlack:
			bad = append(bad, fmt.Sprintf("call at +%s took %s, far beyond its %s timeout", c.start.Sub(crashed).Round(time.Millisecond), c.took(), rwTimeout))
		case c.outcome == "other" || c.outcome == "ok" && c.start.After(crashSeen) || c.outcome == "lost" && c.start.After(crashSeen):
			bad = append(bad, fmt.Sprintf("call at +%s: %s: %s", c.start.Sub(crashed).Round(time.Millisecond), c.outcome, c.msg))
		case c.outcome == "refused" && !strings.Contains(c.msg, "fixture refuses to start: crash loop"):
			bad = append(bad, "refusal without its reason: "+c.msg)
		case didWait && waited > min(rwTimeout, rwWindow)+rwProxySlack:
			bad = append(bad, fmt.Sprintf("call at +%s waited %s in the proxy, beyond its %s timeout: %s", c.start.Sub(crashed).Round(time.Millisecond), waited, rwTimeout, c.msg))
		case didWait && c.start.After(afterWindow):
			bad = append(bad, fmt.Sprintf("call at +%s, after the window, waited: %s", c.start.Sub(crashed).Round(time.Millisecond), c.msg))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d calls in the crash loop went wrong; the first ones:\n%s", len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
	if nAfter == 0 || byAfter["refused"] != nAfter {
		t.Errorf("after the window %d calls, %d refused at once; want every one refused", nAfter, byAfter["refused"])
	}
	if t.Failed() {
		t.Logf("proxy log:\n%s", tail(proxy.stderr.String(), 3000))
	}
}
