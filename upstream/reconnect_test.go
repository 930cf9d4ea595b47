package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// flakyFake is a stdio server whose first `failures` starts exit with status
// 1 before speaking; later starts run the fake. starts reports how many
// times it was started.
func flakyFake(t *testing.T, name string, failures int) (cfg *config.Server, starts func() int) {
	t.Helper()
	count := filepath.Join(t.TempDir(), "starts")
	cfg = fakeServer(t, name)
	cfg.Args = []string{"-c", `n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo "$n" > "$1"; ` +
		`[ "$n" -le "$2" ] && exit 1; exec "$0"`, cfg.Command, count, strconv.Itoa(failures)}
	cfg.Command = "sh"
	return cfg, func() int {
		b, _ := os.ReadFile(count)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
}

func childPID(t *testing.T, c *Conn) int {
	t.Helper()
	var pid int
	if err := json.Unmarshal(callTool(t, c, "pid", nil)["pid"], &pid); err != nil || pid <= 0 {
		t.Fatalf("pid: %v", err)
	}
	return pid
}

// wantStates checks the delivered snapshots as state#attempt.
// wantStates compares the snapshots delivered up to c's current one.
func wantStates(t *testing.T, seen *snapshots, c *Conn, want string) {
	t.Helper()
	seen.delivered(t, c)
	if got := seen.describe(); got != want {
		t.Errorf("snapshots %s\n      want %s", got, want)
	}
}

// inBackoff reports whether next, a snapshot's NextRetry, is min to max
// after some moment between from and to, when the snapshot was published
// (to may be its delivery: OnSnapshot's goroutine may lag the publication).
func inBackoff(next, from, to time.Time, min, max time.Duration) bool {
	return !next.Before(from.Add(min)) && !next.After(to.Add(max))
}

// TestReconnectAfterKill: with reconnect_wait 0 (the wait turned off) a
// request while the server is down fails at once, and the failed snapshot
// has no catalog. wait_test.go has the window.
func TestReconnectAfterKill(t *testing.T) {
	t.Parallel()
	var seen snapshots
	var logs logBuffer
	// Long enough that the request below is made while the server is
	// still down, however late the failed snapshot is delivered.
	const retry = 3 * time.Second
	backoff := func(int) time.Duration { return retry }
	cfg := fakeServer(t, "killed")
	cfg.ReconnectWait = durPtr(0)
	c := start(t, cfg, Options{OnSnapshot: seen.add, Backoff: backoff, Logger: testLogger(&logs)})
	first := mustConnected(t, c)
	pid := childPID(t, c)

	errc := make(chan error, 1)
	go func() {
		_, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"slow"}`))
		errc <- err
	}()
	logs.waitLog(t, 10*time.Second, "fake got slow") // the call is in flight
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		// It fails on the loss, not by its timeout (10 s) running out.
		if d := time.Since(killed); d > time.Duration(cfg.Timeout)/2 {
			t.Errorf("in-flight call failed after %s, want well before its %s timeout", d, time.Duration(cfg.Timeout))
		}
		if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "killed by signal killed") {
			t.Errorf("in-flight call: %v, want connection lost: killed", err)
		}
	case <-time.After(time.Duration(cfg.Timeout)):
		t.Fatal("in-flight call did not fail")
	}

	_, failed, failedAt := seen.wait(t, 5*time.Second, 1, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	if failed.Attempt != 0 || !errors.Is(failed.Err, ErrProcessExited) || len(failed.Tools) != 0 {
		t.Errorf("failed snapshot: attempt %d err %v, %d tools", failed.Attempt, failed.Err, len(failed.Tools))
	}
	// The snapshot was published after the kill and before its delivery
	// (on OnSnapshot's own goroutine, which may lag), so NextRetry, the
	// publication plus the backoff, lies between the two plus the backoff.
	if !inBackoff(failed.NextRetry, killed, failedAt, retry, retry) {
		t.Errorf("NextRetry %s after the kill, %s after the delivery; want the %s backoff from the failure in between",
			failed.NextRetry.Sub(killed), failed.NextRetry.Sub(failedAt), retry)
	}
	// Refused at once: a DownError that did not wait (Waited is 0 only for
	// a request refused without joining the wait).
	_, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"echo"}`))
	var de *DownError
	if !errors.As(err, &de) || !errors.Is(err, ErrNotConnected) || de.Waited != 0 {
		t.Errorf("request while down: %v, want a DownError (ErrNotConnected) at once", err)
	}

	_, back, backAt := seen.wait(t, 10*time.Second, 2, "connected again", func(s *Snapshot) bool { return s.State == StateConnected })
	if backAt.Before(failed.NextRetry) {
		t.Errorf("reconnected %s before NextRetry, within the backoff", failed.NextRetry.Sub(backAt))
	}
	if back.Generation <= failed.Generation || len(back.Tools) != len(first.Tools) || back.Err != nil || back.Attempt != 0 {
		t.Errorf("new snapshot: generation %d (failed %d), %d tools, err %v, attempt %d",
			back.Generation, failed.Generation, len(back.Tools), back.Err, back.Attempt)
	}
	if newPID := childPID(t, c); newPID == pid {
		t.Errorf("same child pid %d after reconnect", pid)
	}
	callTool(t, c, "echo", map[string]any{"after": "reconnect"})
	wantStates(t, &seen, c, "connected#0 failed#0 connecting#1 connected#0")
}

func TestReconnectFailsThenWorks(t *testing.T) {
	t.Parallel()
	var seen snapshots
	cfg, starts := flakyFake(t, "flaky", 3)
	c := start(t, cfg, Options{OnSnapshot: seen.add, Backoff: fastRetry})
	// Ready closed when the first attempt failed.
	if s := c.Snapshot(); s.State == StateConnected {
		t.Errorf("connected at Ready; the first attempt must have failed")
	}
	// Delivered, not only published: OnSnapshot runs on its own goroutine.
	seen.wait(t, 10*time.Second, 0, "connected", func(s *Snapshot) bool { return s.State == StateConnected })
	if n := starts(); n != 4 {
		t.Errorf("started %d times, want 4 (3 failures, then the 4th attempt)", n)
	}
	wantStates(t, &seen, c, "failed#0 connecting#1 failed#1 connecting#2 failed#2 connecting#3 connected#0")
	for _, s := range seen.list() {
		if s.State == StateFailed && (s.Err == nil || s.Err.Error() != "process exited with status 1" || s.NextRetry.IsZero()) {
			t.Errorf("failed#%d: err %v next retry %v", s.Attempt, s.Err, s.NextRetry)
		}
		if s.State == StateConnecting && s.Err == nil {
			t.Errorf("connecting#%d does not keep the last error", s.Attempt)
		}
	}
	callTool(t, c, "echo", nil)
}

func TestReconnectParksThenProbes(t *testing.T) {
	t.Parallel()
	var seen snapshots
	cfg, starts := flakyFake(t, "parked", 1+reconnectAttempts)
	const probe = 400 * time.Millisecond
	c := start(t, cfg, Options{OnSnapshot: seen.add, Backoff: fastRetry, ProbeInterval: probe})
	// The last attempt's failure, which NextRetry is the probe interval
	// after, came after its connecting snapshot was published (after from)
	// and before the parked one was delivered (at to).
	_, from, _ := waitPublished(t, c, 10*time.Second, "last attempt", func(s *Snapshot) bool {
		return s.State == StateParked || s.State == StateConnected || s.State == StateConnecting && s.Attempt >= reconnectAttempts
	})
	_, parked, to := seen.wait(t, 10*time.Second, 0, "parked", func(s *Snapshot) bool { return s.State == StateParked })
	if parked.Attempt != reconnectAttempts || parked.Err == nil {
		t.Errorf("parked snapshot: attempt %d err %v", parked.Attempt, parked.Err)
	}
	if !inBackoff(parked.NextRetry, from, to, probe, probe) {
		t.Errorf("parked NextRetry %s after the last attempt began, %s after it was published; want the probe interval %s",
			parked.NextRetry.Sub(from), parked.NextRetry.Sub(to), probe)
	}
	if s := c.Snapshot(); s.State == StateParked {
		if _, err := c.Request(context.Background(), "tools/list", nil); !errors.Is(err, ErrNotConnected) {
			t.Errorf("request while parked: %v", err)
		}
	}
	_, _, backAt := seen.wait(t, 10*time.Second, 0, "probe connects", func(s *Snapshot) bool { return s.State == StateConnected })
	if backAt.Before(parked.NextRetry) {
		t.Errorf("probe connected %s before NextRetry, within the probe interval %s", parked.NextRetry.Sub(backAt), probe)
	}
	if n := starts(); n != 2+reconnectAttempts {
		t.Errorf("started %d times, want %d", n, 2+reconnectAttempts)
	}
	wantStates(t, &seen, c, "failed#0 connecting#1 failed#1 connecting#2 failed#2 connecting#3 failed#3 "+
		"connecting#4 failed#4 connecting#5 parked#5 connecting#6 connected#0")
	callTool(t, c, "echo", nil)
}

func TestReconnectAfterKeepaliveFailure(t *testing.T) {
	t.Parallel()
	var seen snapshots
	cfg := fakeServer(t, "deaf-again", "noping")
	cfg.Keepalive = dur(200 * time.Millisecond)
	c := start(t, cfg, Options{OnSnapshot: seen.add, Backoff: fastRetry})
	first := mustConnected(t, c)
	_, failed, _ := seen.wait(t, 5*time.Second, 1, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	if failed.Err == nil || !strings.HasPrefix(failed.Err.Error(), "keepalive ping failed: ") {
		t.Errorf("err %v", failed.Err)
	}
	_, back, _ := seen.wait(t, 5*time.Second, 2, "connected again", func(s *Snapshot) bool { return s.State == StateConnected })
	if back.Generation <= first.Generation || len(back.Tools) != len(first.Tools) {
		t.Errorf("reconnected: generation %d (first %d), %d tools", back.Generation, first.Generation, len(back.Tools))
	}
}

func TestCloseDuringBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  Options
		state State
	}{
		{"backoff wait", Options{Backoff: func(int) time.Duration { return 30 * time.Second }}, StateFailed},
		{"parked wait", Options{Backoff: func(int) time.Duration { return 0 }, ProbeInterval: time.Minute}, StateParked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeServer(t, "down")
			cfg.Command, cfg.Args = "sh", []string{"-c", "exit 7"}
			c := start(t, cfg, tc.opts)
			waitSnapshot(t, c, 10*time.Second, tc.state.String(), func(s *Snapshot) bool { return s.State == tc.state })
			began := time.Now()
			_ = c.Close()
			if d := time.Since(began); d > time.Second {
				t.Errorf("Close took %s during the wait, want < 1s", d)
			}
			if s := c.Snapshot(); s.State != StateClosed {
				t.Errorf("state %s after Close", s.State)
			}
		})
	}
}

// TestListChangedBurstCoalesced: 100 list_changed notifications at once lead
// to a few re-discoveries, not 100: one running and one pending at any
// time, so a burst the reader sees in one go makes two; on a loaded machine
// the reader may see its tail after the pending run began, hence at most
// three. Each re-discovery publishes the unchanged catalog once, counted as
// an announcement (Snapshot.Announced), so that clients hear of it.
func TestListChangedBurstCoalesced(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	var seen snapshots
	c := start(t, fakeServer(t, "bursty", "countlists"), Options{Logger: testLogger(&logs), OnSnapshot: seen.add})
	before := mustConnected(t, c)
	const pages = 3 // the fake's tools/list has three pages
	lists := func() int { return len(logs.lines("fake served tools/list")) }
	waitFor(t, 5*time.Second, "initial discovery logged", func() bool { return lists() == pages })

	callTool(t, c, "burst", nil)
	// Wait until the count has not moved for a while.
	last, stable := -1, time.Now()
	for time.Since(stable) < 500*time.Millisecond {
		if n := lists(); n != last {
			last, stable = n, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	runs := (last - pages) / pages
	if runs < 1 || runs > 3 || (last-pages)%pages != 0 {
		t.Errorf("%d tools/list pages after the burst, want 1 to 3 full re-discoveries of %d pages", last-pages, pages)
	}
	s, got := c.Snapshot(), seen.delivered(t, c)
	if s.Generation != before.Generation+uint64(runs) || len(got) != 1+runs {
		t.Errorf("generation %d (was %d), %d snapshots; want one publish per re-discovery (%d)", s.Generation, before.Generation, len(got), runs)
	}
	if s.Announced != (Announced{Tools: uint64(runs)}) || before.Announced != (Announced{}) {
		t.Errorf("announcements counted %+v (before %+v), want %d tools", s.Announced, before.Announced, runs)
	}
	if !reflect.DeepEqual(s.Tools, before.Tools) {
		t.Errorf("the tools changed: %d, were %d", len(s.Tools), len(before.Tools))
	}
}

// TestReconnectTimingDocumentedSchedule measures a kill -9 of the stdio child
// with the documented schedule: StateFailed at once, StateConnected again after
// 1 s ±20 % plus the connect time. It bounds when each snapshot was
// published from both sides, by polling c.Snapshot (waitPublished) and by
// OnSnapshot's delivery, which may lag the publication on a loaded machine.
func TestReconnectTimingDocumentedSchedule(t *testing.T) {
	t.Parallel()
	var seen snapshots
	c := start(t, fakeServer(t, "timed"), Options{OnSnapshot: seen.add, Backoff: specBackoff})
	mustConnected(t, c)
	pid := childPID(t, c)
	gen := c.Snapshot().Generation
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The failure is the next publication (gen+1), the next attempt's
	// connecting snapshot the one after it; both are polled for before
	// waiting for any delivery, which may lag.
	_, failedFrom, _ := waitPublished(t, c, 5*time.Second, "failed", func(s *Snapshot) bool { return s.Generation > gen })
	_, nextFrom, nextTo := waitPublished(t, c, 5*time.Second, "connecting", func(s *Snapshot) bool { return s.Generation > gen+1 })
	_, failed, failedTo := seen.wait(t, 5*time.Second, 1, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	if failed.Generation != gen+1 {
		t.Fatalf("the failed snapshot is generation %d, want %d (the first after the kill)", failed.Generation, gen+1)
	}
	_, _, backTo := seen.wait(t, 10*time.Second, 2, "connected", func(s *Snapshot) bool { return s.State == StateConnected })
	if failedFrom.IsZero() || nextFrom.IsZero() {
		// The first look already found it: no lower bound for it.
		t.Logf("a publication was already there at the first look (failed %v, connecting %v)", failedFrom.IsZero(), nextFrom.IsZero())
	}
	t.Logf("kill -9 -> failed %s; -> connected %s (backoff %s, connect %s)", failedFrom.Sub(killed), backTo.Sub(killed),
		failed.NextRetry.Sub(failedFrom), backTo.Sub(nextFrom))
	// At once: the exit itself is noticed, not a keepalive or a request
	// (none is sent). The bound leaves room for a loaded machine.
	if d := failedFrom.Sub(killed); !failedFrom.IsZero() && d > 2*time.Second {
		t.Errorf("failed more than %s after the kill, want at once", d)
	}
	// NextRetry is the backoff after a moment between the kill and the
	// failure's publication.
	if !inBackoff(failed.NextRetry, killed, failedTo, 800*time.Millisecond, 1200*time.Millisecond) {
		t.Errorf("NextRetry %s after the kill, %s after the failure was published; want 1s ±20%% after the failure",
			failed.NextRetry.Sub(killed), failed.NextRetry.Sub(failedTo))
	}
	// The next attempt (its connecting snapshot) starts at NextRetry: not
	// before, and not much later.
	if nextTo.Before(failed.NextRetry) {
		t.Errorf("next attempt published %s before NextRetry", failed.NextRetry.Sub(nextTo))
	}
	if d := nextFrom.Sub(failed.NextRetry); !nextFrom.IsZero() && d > 500*time.Millisecond {
		t.Errorf("next attempt published more than %s after NextRetry, want at NextRetry", d)
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// settle polls count until it is at most limit (5 s at most) and returns
// the last value.
func settle(count func() int, limit int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := count()
		if n <= limit || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNoGoroutineLeakAcrossReconnects kills the child five times; the
// goroutine and file descriptor counts after the last reconnect are what
// they were after the first connection, and after Close what they were
// before New. Not parallel: it counts the whole process's goroutines and
// descriptors.
func TestNoGoroutineLeakAcrossReconnects(t *testing.T) {
	fds := func() int { return openFDs(t) }
	// The first child a process starts also starts the spawner, which lives
	// as long as the process (children_linux.go): start one before counting,
	// in case no earlier test has.
	warm := exec.Command("true")
	if err := startChild(warm); err != nil {
		t.Fatal(err)
	}
	_ = warm.Wait()
	ownChildren.forget(warm.Process.Pid)
	initial, initialFDs := runtime.NumGoroutine(), fds()
	var seen snapshots
	cfg := fakeServer(t, "cycles")
	cfg.Keepalive = dur(time.Hour) // a keepalive goroutine per session too
	c := New(cfg, Options{OnSnapshot: seen.add, Backoff: fastRetry})
	c.Start(context.Background())
	defer c.Close()
	idx, _, _ := seen.wait(t, 10*time.Second, 0, "connected", func(s *Snapshot) bool { return s.State == StateConnected })
	childPID(t, c)
	time.Sleep(100 * time.Millisecond)
	connected, connectedFDs := runtime.NumGoroutine(), fds()

	for cycle := range 5 {
		pid := childPID(t, c)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		idx, _, _ = seen.wait(t, 5*time.Second, idx+1, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
		idx, _, _ = seen.wait(t, 10*time.Second, idx+1, "connected", func(s *Snapshot) bool { return s.State == StateConnected })
		if processAlive(pid) {
			t.Errorf("cycle %d: old child %d still alive", cycle, pid)
		}
	}
	childPID(t, c)
	if n := settle(fds, connectedFDs); n > connectedFDs {
		t.Errorf("%d open files after 5 reconnects, %d after the first connection", n, connectedFDs)
	}
	if n := settle(runtime.NumGoroutine, connected); n > connected {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after 5 reconnects, %d after the first connection:\n%s",
			n, connected, buf[:runtime.Stack(buf, true)])
	}
	_ = c.Close()
	if n := settle(fds, initialFDs); n > initialFDs {
		t.Errorf("%d open files after Close, %d before New", n, initialFDs)
	}
	if n := settle(runtime.NumGoroutine, initial); n > initial {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Close, %d before New:\n%s", n, initial, buf[:runtime.Stack(buf, true)])
	}
}
