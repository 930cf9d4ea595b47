package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// expirer sits in front of an mcp-go Streamable HTTP server and plays a
// server that forgets sessions: requests carrying an expired session id get
// status (404 or 410), as a restarted or idle-expiring server answers. It
// counts initialize requests.
type expirer struct {
	next    http.Handler
	status  int
	streams atomic.Int32 // GET streams open

	mu          sync.Mutex
	seen        map[string]bool // session ids seen on requests
	expired     map[string]bool
	expireNext  bool // the next tools/call expires its session
	expireCalls bool // every tools/call expires its session
	failInits   int  // the next n initialize requests get a 500
	notFound    bool // the next tools/call gets a 404, session or not
	inits       int
	rejected    int // tools/call requests answered with 404 or status
}

func newExpirer(next http.Handler, status int) *expirer {
	return &expirer{next: next, status: status, seen: map[string]bool{}, expired: map[string]bool{}}
}

func (e *expirer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var method string
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		method = m.Method
	}
	sid := r.Header.Get("Mcp-Session-Id")
	e.mu.Lock()
	if method == "initialize" {
		e.inits++
		if e.failInits > 0 {
			e.failInits--
			e.mu.Unlock()
			http.Error(w, "warming up", http.StatusInternalServerError)
			return
		}
	}
	if method == "tools/call" && e.notFound {
		e.notFound = false
		e.rejected++
		e.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	if sid != "" {
		e.seen[sid] = true
		if method == "tools/call" && (e.expireNext || e.expireCalls) {
			e.expireNext = false
			e.expired[sid] = true
		}
		if e.expired[sid] {
			if method == "tools/call" {
				e.rejected++
			}
			e.mu.Unlock()
			http.Error(w, "unknown session", e.status)
			return
		}
	}
	e.mu.Unlock()
	if r.Method == http.MethodGet {
		e.streams.Add(1)
		defer e.streams.Add(-1)
	}
	e.next.ServeHTTP(w, r)
}

// expireAll forgets every session seen so far.
func (e *expirer) expireAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for sid := range e.seen {
		e.expired[sid] = true
	}
}

func (e *expirer) set(fn func(e *expirer)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(e)
}

func (e *expirer) initCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inits
}

// expiringServer starts an mcp-go HTTP server behind an expirer.
func expiringServer(t *testing.T, srv *server.MCPServer, status int) (*expirer, string) {
	t.Helper()
	ex := newExpirer(server.NewStreamableHTTPServer(srv), status)
	ts := httptest.NewServer(ex)
	t.Cleanup(ts.Close) // runs after the Conn's Close
	return ex, ts.URL + "/mcp"
}

func hello(t *testing.T, c *Conn, who string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"`+who+`"}}`))
	if err == nil && !strings.Contains(string(raw), "hello "+who) {
		t.Errorf("result %s", raw)
	}
	return err
}

func TestHTTPSessionExpiryRenews(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusGone} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			ex, url := expiringServer(t, newMCPGoServer(), status)
			var seen snapshots
			c := start(t, httpServer("expiring", url), Options{OnSnapshot: seen.add, Backoff: fastRetry})
			first := mustConnected(t, c)
			if err := hello(t, c, "before"); err != nil {
				t.Fatal(err)
			}

			ex.set(func(e *expirer) { e.expireNext = true })
			if err := hello(t, c, "retried"); err != nil {
				t.Fatalf("call that met the expired session: %v", err)
			}
			if n := ex.initCount(); n != 2 {
				t.Errorf("%d initialize requests, want 2", n)
			}
			if err := hello(t, c, "after"); err != nil {
				t.Fatal(err)
			}
			s := mustConnected(t, c)
			if s.Generation != first.Generation || len(seen.delivered(t, c)) != 1 {
				t.Errorf("unchanged catalog republished: generation %d (was %d), snapshots %s", s.Generation, first.Generation, seen.describe())
			}
			if n := ex.initCount(); n != 2 {
				t.Errorf("%d initialize requests at the end, want 2", n)
			}
		})
	}
}

// TestHTTPNotFoundWithoutSession: a server that gave no session id has no
// session to expire: its 404 is that request's failure, and nothing is
// re-initialized or re-sent.
func TestHTTPNotFoundWithoutSession(t *testing.T) {
	t.Parallel()
	ex := newExpirer(server.NewStreamableHTTPServer(newMCPGoServer(), server.WithStateLess(true)), http.StatusNotFound)
	ts := httptest.NewServer(ex)
	t.Cleanup(ts.Close)
	var seen snapshots
	c := start(t, httpServer("stateless", ts.URL+"/mcp"), Options{OnSnapshot: seen.add, Backoff: fastRetry})
	mustConnected(t, c)
	ex.set(func(e *expirer) { e.notFound = true })
	err := hello(t, c, "missing")
	if err == nil || errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err %v, want a plain 404 failure", err)
	}
	if err := hello(t, c, "fine"); err != nil {
		t.Fatal(err)
	}
	if n := ex.initCount(); n != 1 || len(seen.delivered(t, c)) != 1 {
		t.Errorf("%d initialize requests, snapshots %s; want 1 and only the first", n, seen.describe())
	}
}

// TestHTTPSessionExpiryConcurrent: many calls meet one expired session;
// the session is renewed once and every call succeeds.
func TestHTTPSessionExpiryConcurrent(t *testing.T) {
	t.Parallel()
	ex, url := expiringServer(t, newMCPGoServer(), http.StatusNotFound)
	cfg := httpServer("busy", url)
	// The keepalive may meet the expiry too. Its interval is also each
	// ping's timeout: long enough for a loaded machine to answer within.
	cfg.Keepalive = dur(time.Second)
	c := start(t, cfg, Options{Backoff: fastRetry})
	mustConnected(t, c)

	ex.set(func(e *expirer) { e.expireNext = true })
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hello(t, c, "n"+string(rune('a'+i))); err != nil {
				failed.Add(1)
				t.Errorf("call %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if n := ex.initCount(); n != 2 {
		t.Errorf("%d initialize requests, want 2", n)
	}
	if err := hello(t, c, "later"); err != nil {
		t.Errorf("later call: %v", err)
	}
	mustConnected(t, c)
}

// TestHTTPSessionExpiryFoundByKeepalive: an idle connection whose session
// expired is renewed by the keepalive ping, before any request meets it.
func TestHTTPSessionExpiryFoundByKeepalive(t *testing.T) {
	t.Parallel()
	ex, url := expiringServer(t, newMCPGoServer(), http.StatusNotFound)
	cfg := httpServer("idle", url)
	// Also the ping's timeout: long enough for a loaded machine to answer
	// within (a ping timing out would drop the connection instead).
	cfg.Keepalive = dur(time.Second)
	var seen snapshots
	c := start(t, cfg, Options{OnSnapshot: seen.add, Backoff: fastRetry})
	mustConnected(t, c)
	ex.expireAll()
	waitFor(t, 10*time.Second, "renewed", func() bool { return ex.initCount() == 2 })
	if err := hello(t, c, "renewed"); err != nil {
		t.Fatal(err)
	}
	if n := ex.initCount(); n != 2 || len(seen.delivered(t, c)) != 1 {
		t.Errorf("%d initialize requests, snapshots %s; want 2 and only the first", n, seen.describe())
	}
}

// TestHTTPSessionRenewalPublishesChanges: the re-initialized session has
// other tools (the server changed them without list_changed): they are
// published under a new Generation.
func TestHTTPSessionRenewalPublishesChanges(t *testing.T) {
	t.Parallel()
	var showSecond atomic.Bool
	srv := server.NewMCPServer("changing", "1.0", server.WithToolCapabilities(false),
		server.WithToolFilter(func(_ context.Context, tools []mcp.Tool) []mcp.Tool {
			if showSecond.Load() {
				return tools
			}
			var out []mcp.Tool
			for _, tl := range tools {
				if tl.Name != "second" {
					out = append(out, tl)
				}
			}
			return out
		}))
	text := func(s string) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(s), nil
		}
	}
	srv.AddTool(mcp.NewTool("hello"), text("hello x"))
	srv.AddTool(mcp.NewTool("second"), text("2"))
	ex, url := expiringServer(t, srv, http.StatusNotFound)
	var seen snapshots
	c := start(t, httpServer("changing", url), Options{OnSnapshot: seen.add, Backoff: fastRetry})
	first := mustConnected(t, c)
	if got := toolNames(first.Tools); len(got) != 1 {
		t.Fatalf("tools %v", got)
	}
	showSecond.Store(true)
	ex.set(func(e *expirer) { e.expireNext = true })
	if _, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	_, s, _ := seen.wait(t, 5*time.Second, 1, "new catalog", func(s *Snapshot) bool { return len(s.Tools) == 2 })
	if s.State != StateConnected || s.Generation != first.Generation+1 {
		t.Errorf("state %s generation %d (first %d)", s.State, s.Generation, first.Generation)
	}
	wantStates(t, &seen, c, "connected#0 connected#0")
}

// TestHTTPSessionExpiredAgain: the re-sent request meets an expired session
// again: the connection is dropped, reconnected on the schedule, and the
// request was not retried a second time.
func TestHTTPSessionExpiredAgain(t *testing.T) {
	t.Parallel()
	ex, url := expiringServer(t, newMCPGoServer(), http.StatusNotFound)
	var seen snapshots
	c := start(t, httpServer("flapping", url), Options{OnSnapshot: seen.add, Backoff: fastRetry})
	mustConnected(t, c)

	ex.set(func(e *expirer) { e.expireCalls = true })
	err := hello(t, c, "never")
	if !errors.Is(err, ErrNotConnected) || !errors.Is(err, ErrSessionExpired) || !strings.Contains(err.Error(), "again right after re-initialize") {
		t.Fatalf("err %v, want not connected: session expired again", err)
	}
	ex.set(func(e *expirer) { e.expireCalls = false })
	_, failed, _ := seen.wait(t, 5*time.Second, 1, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	if !errors.Is(failed.Err, ErrSessionExpired) || failed.Attempt != 0 {
		t.Errorf("failed snapshot: attempt %d err %v", failed.Attempt, failed.Err)
	}
	seen.wait(t, 10*time.Second, 2, "reconnected", func(s *Snapshot) bool { return s.State == StateConnected })
	if err := hello(t, c, "back"); err != nil {
		t.Fatal(err)
	}
	ex.mu.Lock()
	rejected, inits := ex.rejected, ex.inits
	ex.mu.Unlock()
	if rejected != 2 || inits != 3 {
		t.Errorf("%d calls rejected, %d initialize requests; want 2 (the call and its one retry) and 3", rejected, inits)
	}
	wantStates(t, &seen, c, "connected#0 failed#0 connecting#1 connected#0")
}

// TestHTTPSessionRenewalFails: the re-initialize itself fails: the
// connection is dropped and the reconnect schedule takes over.
func TestHTTPSessionRenewalFails(t *testing.T) {
	t.Parallel()
	ex, url := expiringServer(t, newMCPGoServer(), http.StatusGone)
	var seen snapshots
	c := start(t, httpServer("renewfail", url), Options{OnSnapshot: seen.add, Backoff: fastRetry})
	mustConnected(t, c)

	ex.set(func(e *expirer) { e.expireNext, e.failInits = true, 1 })
	err := hello(t, c, "never")
	if !errors.Is(err, ErrNotConnected) || !errors.Is(err, ErrSessionExpired) || !strings.Contains(err.Error(), "re-initialize failed") {
		t.Fatalf("err %v, want not connected: session expired; re-initialize failed", err)
	}
	_, failed, _ := seen.wait(t, 5*time.Second, 1, "failed", func(s *Snapshot) bool { return s.State == StateFailed })
	if !errors.Is(failed.Err, ErrSessionExpired) || !strings.Contains(failed.Err.Error(), "HTTP 500") {
		t.Errorf("failed snapshot err %v", failed.Err)
	}
	seen.wait(t, 10*time.Second, 2, "reconnected", func(s *Snapshot) bool { return s.State == StateConnected })
	if err := hello(t, c, "back"); err != nil {
		t.Fatal(err)
	}
	if n := ex.initCount(); n != 3 {
		t.Errorf("%d initialize requests, want 3 (first, failed renewal, reconnect)", n)
	}
}

// TestNoLeakAcrossHTTPRenewals renews the session five times and drops and
// reconnects the connection twice: goroutines and open files come back to
// what they were after the first connection. Not parallel: it counts the
// whole process's goroutines and descriptors.
func TestNoLeakAcrossHTTPRenewals(t *testing.T) {
	fds := func() int { return openFDs(t) }
	ex, url := expiringServer(t, newMCPGoServer(), http.StatusNotFound)
	var seen snapshots
	c := New(httpServer("renewals", url), Options{OnSnapshot: seen.add, Backoff: fastRetry})
	c.Start(context.Background())
	defer c.Close()
	idx, _, _ := seen.wait(t, 10*time.Second, 0, "connected", func(s *Snapshot) bool { return s.State == StateConnected })
	if err := hello(t, c, "first"); err != nil {
		t.Fatal(err)
	}
	// Measure in the same state at the start and at the end: the live
	// session's GET stream open, and its pool without idle connections
	// (how many a session keeps depends on how its requests overlapped).
	quiesce := func() {
		waitFor(t, 5*time.Second, "one GET stream", func() bool { return ex.streams.Load() == 1 })
		c.current().httpBase.CloseIdleConnections()
		time.Sleep(100 * time.Millisecond)
	}
	quiesce()
	connected, connectedFDs := runtime.NumGoroutine(), fds()

	for i := range 5 {
		ex.set(func(e *expirer) { e.expireNext = true })
		if err := hello(t, c, "renewal"); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	for range 2 {
		ex.set(func(e *expirer) { e.expireCalls = true })
		if err := hello(t, c, "dropped"); !errors.Is(err, ErrNotConnected) {
			t.Fatalf("err %v, want the connection dropped", err)
		}
		ex.set(func(e *expirer) { e.expireCalls = false })
		idx, _, _ = seen.wait(t, 10*time.Second, idx+1, "reconnected", func(s *Snapshot) bool { return s.State == StateConnected })
	}
	if err := hello(t, c, "last"); err != nil {
		t.Fatal(err)
	}
	if n := ex.initCount(); n != 1+5+2*2 {
		t.Errorf("%d initialize requests, want %d", n, 1+5+2*2)
	}
	quiesce()
	if n := settle(fds, connectedFDs); n > connectedFDs {
		t.Errorf("%d open files after the renewals, %d after the first connection", n, connectedFDs)
	}
	if n := settle(runtime.NumGoroutine, connected); n > connected {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the renewals, %d after the first connection:\n%s",
			n, connected, buf[:runtime.Stack(buf, true)])
	}
}

// An HTTP server that can no longer be reached (its listener closed) has
// dropped the connection, as a stdio child that exited has: the next
// request that cannot connect, or the GET stream's reopening, ends the
// session, and the connection goes down and into the reconnect schedule
// instead of staying "connected" with every call failing.
func TestHTTPUnreachableServerDrops(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(server.NewStreamableHTTPServer(newMCPGoServer()))
	t.Cleanup(ts.Close) // runs after the Conn's Close
	var seen snapshots
	c := start(t, httpServer("gone", ts.URL+"/mcp"), Options{OnSnapshot: seen.add, Backoff: fastRetry})
	mustConnected(t, c)
	if err := hello(t, c, "before"); err != nil {
		t.Fatal(err)
	}
	// Close waits for the handlers, and the GET stream's stays: its
	// connection is cut first.
	ts.Listener.Close()
	ts.CloseClientConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.Request(ctx, "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"after"}}`))
	_, down, _ := seen.wait(t, 10*time.Second, 1, "down", func(s *Snapshot) bool { return s.State != StateConnected })
	if down.Err == nil || !strings.Contains(down.Err.Error(), "the server cannot be reached") {
		t.Errorf("down snapshot: state %s, err %v; want the server cannot be reached", down.State, down.Err)
	}
}
