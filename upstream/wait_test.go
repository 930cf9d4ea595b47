package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// waits records Options.OnWait calls.
type waits struct {
	mu  sync.Mutex
	all []string // outcome
	d   []time.Duration
}

func (w *waits) add(outcome string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, outcome)
	w.d = append(w.d, d)
}

func (w *waits) count(outcome string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, o := range w.all {
		if o == outcome {
			n++
		}
	}
	return n
}

func echoParams(text string) json.RawMessage {
	return json.RawMessage(`{"name":"echo","arguments":{"text":` + fmt.Sprintf("%q", text) + `}}`)
}

// TestReconnectWindow: a request that arrives while a dropped server is
// reconnecting waits and is sent once it is back; meanwhile the snapshots
// keep the catalog and say Listed until the window's end; the call in
// flight at the drop is lost, not re-sent.
func TestReconnectWindow(t *testing.T) {
	t.Parallel()
	var seen snapshots
	var w waits
	var logs logBuffer
	// Long enough that the requests below are made while the server is
	// still down, however late the failed snapshot is delivered.
	const backoff = 2 * time.Second
	cfg := fakeServer(t, "window")
	cfg.ReconnectWait = durPtr(5 * time.Second)
	c := start(t, cfg, Options{OnSnapshot: seen.add, OnWait: w.add, Logger: testLogger(&logs), Backoff: func(int) time.Duration { return backoff }})
	first := mustConnected(t, c)
	pid := childPID(t, c)

	lost := make(chan error, 1)
	go func() {
		_, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"slow"}`))
		lost <- err
	}()
	logs.waitLog(t, 10*time.Second, "fake got slow") // the call is in flight
	dropped := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-lost; !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("in-flight call: %v, want connection lost", err)
	}
	_, down, downAt := seen.wait(t, 5*time.Second, 1, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	// The window opened when the drop was noticed: after the kill, before
	// the snapshot saying so was delivered.
	if !inBackoff(down.ReconnectUntil, dropped, downAt, 5*time.Second, 5*time.Second) {
		t.Errorf("ReconnectUntil %s after the kill, %s after the failed snapshot's delivery; want reconnect_wait (5s) after the drop",
			down.ReconnectUntil.Sub(dropped), down.ReconnectUntil.Sub(downAt))
	}
	if !down.Listed() || !down.Available() || len(down.Tools) != len(first.Tools) || !down.Capabilities.Tools {
		t.Errorf("snapshot in the window: listed %v, available %v, %d tools (want %d)", down.Listed(), down.Available(), len(down.Tools), len(first.Tools))
	}

	// Requests arriving now wait for the reconnection, and are sent then.
	var wg sync.WaitGroup
	errs := make([]error, 20)
	ended := make([]time.Time, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, err := c.Request(context.Background(), "tools/call", echoParams(fmt.Sprint(i)))
			ended[i] = time.Now()
			if err == nil && !strings.Contains(string(raw), fmt.Sprintf(`"text":"%d"`, i)) {
				err = fmt.Errorf("result %s", raw)
			}
			errs[i] = err
		}()
	}
	// from is a moment before the reconnection was published.
	_, connFrom, _ := waitPublished(t, c, 10*time.Second, "reconnected", func(s *Snapshot) bool { return s.State == StateConnected })
	if connFrom.IsZero() {
		t.Fatal("the server was back before the requests were made: nothing waited")
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		// Sent as soon as the server was back, not failed at the window's
		// end (2 s is a loaded machine's margin; the window is 5 s).
		if d := ended[i].Sub(connFrom); d > 2*time.Second {
			t.Errorf("request %d ended %s after the reconnection", i, d)
		}
	}
	if n := w.count(WaitSent); n != len(errs) {
		t.Errorf("OnWait: %d sent, want %d (%v)", n, len(errs), w.all)
	}
	back := mustConnected(t, c)
	if !back.ReconnectUntil.IsZero() || !back.Listed() {
		t.Errorf("connected snapshot: ReconnectUntil %v", back.ReconnectUntil)
	}
	wantStates(t, &seen, c, "connected#0 failed#0 connecting#1 connected#0")
	for _, s := range seen.list()[1:3] {
		if s.ReconnectUntil != down.ReconnectUntil || len(s.Tools) != len(first.Tools) {
			t.Errorf("%s#%d: ReconnectUntil %v, %d tools; want the window and the catalog", s.State, s.Attempt, s.ReconnectUntil, len(s.Tools))
		}
	}
}

// TestReconnectWindowCloses: when the server does not come back within
// reconnect_wait, the waiting requests fail at the window's end saying why,
// a snapshot without the catalog is published, and later requests fail at
// once; attempts failing within the window do not extend it.
func TestReconnectWindowCloses(t *testing.T) {
	t.Parallel()
	var seen snapshots
	var w waits
	const window = 600 * time.Millisecond
	cfg, _ := flakyFake(t, "loop", 1) // the first start connects; restarts exit 1
	cfg.Args[1] = `n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo "$n" > "$1"; ` +
		`[ "$n" -gt 1 ] && { echo "crash loop $n" >&2; exit 1; }; exec "$0"`
	cfg.ReconnectWait = durPtr(window)
	c := start(t, cfg, Options{OnSnapshot: seen.add, OnWait: w.add, Backoff: func(int) time.Duration { return 150 * time.Millisecond }})
	mustConnected(t, c)
	dropped := time.Now()
	_, _ = c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"exit"}`))

	began := time.Now()
	_, err := c.Request(context.Background(), "tools/call", echoParams("x"))
	ended := time.Now()
	waited := ended.Sub(began)
	var de *DownError
	if !errors.As(err, &de) || !errors.Is(err, ErrNotConnected) {
		t.Fatalf("request in a crash loop: %v, want a DownError", err)
	}
	// The window opened no sooner than the drop; the check of its end
	// against the window0 of the snapshots follows below.
	if end := ended.Sub(dropped); end < window {
		t.Errorf("the waiting request failed %s after the drop, before the window's end (%s)", end, window)
	}
	msg := de.Error()
	for _, want := range []string{"MCP server 'loop' is not connected", "process exited with status 1; last stderr: crash loop", "the request waited"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// Between attempts it says when the next one starts; during one, that
	// one is under way.
	if !strings.Contains(msg, "; next attempt in ") && !strings.Contains(msg, "not connected (connecting): ") {
		t.Errorf("error %q says neither when the next attempt starts nor that one is under way", msg)
	}
	if de.Waited <= 0 || de.Waited > waited {
		t.Errorf("Waited %s, the request took %s", de.Waited, waited)
	}
	if n := w.count(WaitTimeout); n != 1 {
		t.Errorf("OnWait %v, want one timeout", w.all)
	}
	// Several attempts failed within the window; it closed all the same.
	_, closed, _ := seen.wait(t, 5*time.Second, 1, "window closed", func(s *Snapshot) bool {
		return s.State != StateConnected && s.ReconnectUntil.IsZero()
	})
	if len(closed.Tools) != 0 || closed.Listed() || closed.Available() {
		t.Errorf("after the window: %d tools, listed %v, available %v", len(closed.Tools), closed.Listed(), closed.Available())
	}
	var window0 time.Time
	failedWithin := 0
	for _, s := range seen.list() {
		switch {
		case s.State == StateFailed && s.Attempt == 0:
			window0 = s.ReconnectUntil
		case s.State == StateFailed && !s.ReconnectUntil.IsZero():
			failedWithin++
			if !s.ReconnectUntil.Equal(window0) {
				t.Errorf("failed#%d moved the window's end from %v to %v", s.Attempt, window0, s.ReconnectUntil)
			}
		}
	}
	if failedWithin == 0 {
		t.Errorf("snapshots %s: want a failed attempt within the window", seen.describe())
	}
	// It failed at the window's end, not at its own 10 s timeout (the
	// slack is for a loaded machine waking it late).
	if late := ended.Sub(window0); window0.IsZero() || late > 2*time.Second {
		t.Errorf("the waiting request failed %s after the window's end %v", late, window0)
	}
	// Refused at once: Waited is 0 only for a request that never waited.
	_, err = c.Request(context.Background(), "tools/call", echoParams("y"))
	if !errors.As(err, &de) || de.Waited != 0 {
		t.Errorf("after the window: %v, want a DownError at once", err)
	}
}

// TestReconnectWaitBoundedByRequest: a waiting request ends with its own
// deadline, or when its caller cancels, whichever is first; the window is
// not its bound then.
func TestReconnectWaitBoundedByRequest(t *testing.T) {
	t.Parallel()
	var w waits
	cfg := fakeServer(t, "bounded")
	cfg.ReconnectWait = durPtr(10 * time.Second)
	c := start(t, cfg, Options{OnWait: w.add}) // noRetry: down for the test
	mustConnected(t, c)
	_, _ = c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"exit"}`))
	waitSnapshot(t, c, 5*time.Second, "failed", func(s *Snapshot) bool { return s.State == StateFailed })

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := c.Request(ctx, "tools/call", echoParams("t"))
	if d := time.Since(began); !errors.Is(err, context.DeadlineExceeded) || d < 250*time.Millisecond || d > 2*time.Second {
		t.Errorf("request with a 300ms deadline: %v after %s", err, d)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	began = time.Now()
	_, err = c.Request(ctx, "tools/call", echoParams("c"))
	if d := time.Since(began); !errors.Is(err, context.Canceled) || d > 2*time.Second {
		t.Errorf("canceled request: %v after %s", err, d)
	}
	// The server's own timeout counts from the arrival, wait included.
	cfg2 := fakeServer(t, "ownTimeout")
	cfg2.ReconnectWait = durPtr(10 * time.Second)
	cfg2.Timeout = dur(400 * time.Millisecond)
	c2 := start(t, cfg2, Options{OnWait: w.add})
	_, _ = c2.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"exit"}`))
	waitSnapshot(t, c2, 5*time.Second, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	began = time.Now()
	_, err = c2.Request(context.Background(), "tools/call", echoParams("o"))
	if d := time.Since(began); !errors.Is(err, context.DeadlineExceeded) || d > 2*time.Second {
		t.Errorf("request bounded by the server's 400ms timeout: %v after %s", err, d)
	}
	if w.count(WaitTimeout) != 2 || w.count(WaitCanceled) != 1 {
		t.Errorf("OnWait %v, want 2 timeouts and 1 canceled", w.all)
	}
}

// TestWaitForFirstConnection: requests made while the server's first
// connection is under way wait for it (issue 12 item 15), at most until the
// startup deadline; a first connection that fails fails them with its
// reason.
func TestWaitForFirstConnection(t *testing.T) {
	t.Parallel()
	var w waits
	slowStart := func(name, script string) *Conn {
		cfg := fakeServer(t, name)
		cfg.Args = []string{"-c", script, cfg.Command}
		cfg.Command = "sh"
		c := New(cfg, Options{Backoff: noRetry, StartupDeadline: time.Now().Add(10 * time.Second), OnWait: w.add})
		t.Cleanup(func() { _ = c.Close() })
		c.Start(context.Background())
		return c
	}
	c := slowStart("slow", `sleep 1; exec "$0"`)
	if s := c.Snapshot(); !s.Available() || s.Listed() {
		t.Errorf("first connection under way: available %v, listed %v; want available, not listed", s.Available(), s.Listed())
	}
	raw, err := c.Request(context.Background(), "tools/call", echoParams("first"))
	if err != nil || !strings.Contains(string(raw), "first") {
		t.Fatalf("request during the first connection: %s, %v", raw, err)
	}
	// OnWait runs on the request's goroutine before Request returns: the
	// request found no session, waited, and was sent once there was one.
	if n := w.count(WaitSent); n != 1 || len(w.all) != 1 {
		t.Errorf("OnWait saw %v, want one wait that ended with the request sent", w.all)
	}

	failing := slowStart("nostart", `sleep 0.3; echo "no such package" >&2; exit 1`)
	_, err = failing.Request(context.Background(), "tools/call", echoParams("x"))
	var de *DownError
	if !errors.As(err, &de) || !strings.Contains(de.Error(), "no such package") || de.Waited == 0 {
		t.Errorf("request while the first connection fails: %v", err)
	}

	// Past the startup deadline nothing waits.
	cfg := fakeServer(t, "late")
	cfg.Args = []string{"-c", `sleep 5; exec "$0"`, cfg.Command}
	cfg.Command = "sh"
	late := New(cfg, Options{Backoff: noRetry, StartupDeadline: time.Now().Add(-time.Second)})
	t.Cleanup(func() { _ = late.Close() })
	late.Start(context.Background())
	_, err = late.Request(context.Background(), "tools/call", echoParams("x"))
	if !errors.As(err, &de) || de.Waited != 0 || !strings.Contains(err.Error(), "(connecting)") {
		t.Errorf("request past the startup deadline: %v, want a refusal at once", err)
	}
}

// TestWaitQueueBoundedAndOrdered: with thousands of requests for a server
// that is down, maxWaiting wait and the others are refused at once
// (overflow), memory stays bounded, and when the server is back the waiting
// ones are sent, woken in arrival order.
func TestWaitQueueBoundedAndOrdered(t *testing.T) {
	var w waits
	// The first start connects; a restart waits until the file gate exists.
	cfg, _ := flakyFake(t, "crowd", 0)
	gate := filepath.Join(t.TempDir(), "gate")
	cfg.Args[1] = `n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo "$n" > "$1"; ` +
		`if [ "$n" -gt 1 ]; then while [ ! -e "$3" ]; do sleep 0.02; done; fi; exec "$0"`
	cfg.Args = append(cfg.Args, gate)
	cfg.ReconnectWait = durPtr(30 * time.Second)
	cfg.Timeout = dur(30 * time.Second)
	c := start(t, cfg, Options{OnWait: w.add, Backoff: fastRetry})
	mustConnected(t, c)
	_, _ = c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"exit"}`))
	waitSnapshot(t, c, 5*time.Second, "failed", func(s *Snapshot) bool { return s.State == StateFailed })

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	const total = 3 * maxWaiting
	var wg sync.WaitGroup
	var sent, refused atomic.Int32
	var refusedErr atomic.Value
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Request(context.Background(), "tools/call", echoParams(fmt.Sprint(i)))
			switch {
			case err == nil:
				sent.Add(1)
			case errors.Is(err, ErrNotConnected):
				refused.Add(1)
				refusedErr.Store(err.Error())
			default:
				t.Errorf("request %d: %v", i, err)
			}
		}()
	}
	waitFor(t, 10*time.Second, "the queue to fill", func() bool {
		return c.waits.waiting() == maxWaiting && int(refused.Load()) == total-maxWaiting
	})
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	grew := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d waiting, %d refused: heap +%d KB, goroutines +%d", c.waits.waiting(), refused.Load(), grew>>10, runtime.NumGoroutine()-goroutines)
	if grew > 16<<20 {
		t.Errorf("heap grew %d bytes with %d requests waiting", grew, maxWaiting)
	}
	if msg, _ := refusedErr.Load().(string); !strings.Contains(msg, "1000 requests are waiting for it already") {
		t.Errorf("overflow error %q", msg)
	}
	if n := w.count(WaitOverflow); n != total-maxWaiting {
		t.Errorf("OnWait: %d overflow, want %d", n, total-maxWaiting)
	}

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if sent.Load() != maxWaiting || w.count(WaitSent) != maxWaiting || c.waits.waiting() != 0 {
		t.Errorf("%d sent (OnWait %d), %d still waiting; want %d sent", sent.Load(), w.count(WaitSent), c.waits.waiting(), maxWaiting)
	}
}

// TestWaitQueueOrder: wakeAll signals waiters first to last, and leaving
// keeps the rest in order.
func TestWaitQueueOrder(t *testing.T) {
	var q waitQueue
	var ws []*waiter
	for range 5 {
		w, ok := q.join()
		if !ok {
			t.Fatal("join refused")
		}
		ws = append(ws, w)
	}
	q.leave(ws[0])
	q.leave(ws[2])
	q.leave(ws[4])
	var order []*waiter
	for w := q.head; w != nil; w = w.next {
		order = append(order, w)
	}
	if len(order) != 2 || order[0] != ws[1] || order[1] != ws[3] || q.tail != ws[3] || q.waiting() != 2 {
		t.Fatalf("queue after leaving: %d waiters", len(order))
	}
	q.wakeAll()
	q.wakeAll() // a pending wake is not doubled
	for _, w := range order {
		if len(w.wake) != 1 {
			t.Errorf("waiter has %d wakes pending, want 1", len(w.wake))
		}
	}
	q.leave(ws[1])
	q.leave(ws[3])
	if q.head != nil || q.tail != nil || q.waiting() != 0 {
		t.Error("queue not empty")
	}
	for range maxWaiting {
		if _, ok := q.join(); !ok {
			t.Fatal("join refused below maxWaiting")
		}
	}
	if _, ok := q.join(); ok {
		t.Error("join accepted beyond maxWaiting")
	}
}

// TestDownErrorText: the refusal says the server, its state, why, and when
// the next attempt starts.
func TestDownErrorText(t *testing.T) {
	next := time.Date(2026, 12, 1, 11, 35, 17, 0, time.UTC)
	at := next.Add(-2 * time.Second)
	cause := safe(fmt.Errorf("%w with status 1; last stderr: token=abcdef123456", ErrProcessExited))
	tests := []struct {
		e    DownError
		want string
	}{
		{DownError{Server: "fx", State: StateFailed, Cause: cause, NextRetry: next, at: at},
			"MCP server 'fx' is not connected: process exited with status 1; last stderr: token=[REDACTED]; next attempt in 2s (at 2026-12-01T11:35:17Z)"},
		{DownError{Server: "fx", State: StateParked, Cause: cause, NextRetry: next, at: at},
			"MCP server 'fx' is not connected (parked after 5 failed reconnect attempts): process exited with status 1; last stderr: token=[REDACTED]; next attempt in 2s (at 2026-12-01T11:35:17Z)"},
		{DownError{Server: "fx", State: StateConnecting, Waited: 4999 * time.Millisecond, at: at},
			"MCP server 'fx' is not connected (connecting); the request waited 4.999s and was not sent"},
		{DownError{Server: "fx", State: StateClosed, at: at}, "MCP server 'fx' is not connected (closed)"},
		{DownError{Server: "fx", State: StateFailed, Overflow: true, at: at},
			"MCP server 'fx' is not connected; 1000 requests are waiting for it already, so this one was not sent"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
		if !errors.Is(&tt.e, ErrNotConnected) {
			t.Errorf("%s does not match ErrNotConnected", tt.want)
		}
	}
	if !errors.Is(&tests[0].e, ErrProcessExited) {
		t.Error("DownError does not unwrap to its cause")
	}
	if (&Snapshot{State: StateConnected}).DownError() != nil {
		t.Error("a connected snapshot has a DownError")
	}
}
