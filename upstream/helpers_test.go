package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
	"github.com/rs/zerolog"
)

// logBuffer collects zerolog output for assertions; safe for concurrent use.
type logBuffer struct{ testproc.Buffer }

// lines returns the log lines that contain every one of subs.
func (b *logBuffer) lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits until a log line contains every one of subs.
func (b *logBuffer) waitLog(t *testing.T, d time.Duration, subs ...string) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if l := b.lines(subs...); len(l) > 0 {
			return l[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %s; log:\n%s", subs, d, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testLogger(b *logBuffer) zerolog.Logger {
	return zerolog.New(b).Level(zerolog.TraceLevel).With().Timestamp().Logger()
}

func dur(d time.Duration) config.Duration { return config.Duration(d) }

func durPtr(d time.Duration) *config.Duration {
	v := config.Duration(d)
	return &v
}

// fakeServer is a stdio server config running this test binary as the fake
// upstream in the given modes.
func fakeServer(t testing.TB, name string, modes ...string) *config.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &config.Server{
		Name:             name,
		Transport:        "stdio",
		Command:          exe,
		Env:              map[string]string{"UPSTREAM_FAKE": "1", "UPSTREAM_FAKE_MODE": strings.Join(modes, ",")},
		Timeout:          dur(10 * time.Second),
		ConnectTimeout:   dur(15 * time.Second),
		Protocol:         "2025-11-25",
		MaxResponseBytes: 1 << 20,
	}
}

// snapshots records every snapshot OnSnapshot delivers, and when.
type snapshots struct {
	mu  sync.Mutex
	all []*Snapshot
	at  []time.Time
}

func (s *snapshots) add(snap *Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, snap)
	s.at = append(s.at, time.Now())
}

// wait waits until a delivered snapshot after index from satisfies cond,
// and returns its index, the snapshot and when it was delivered.
func (s *snapshots) wait(t *testing.T, d time.Duration, from int, what string, cond func(*Snapshot) bool) (int, *Snapshot, time.Time) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		for i := from; i < len(s.all); i++ {
			if cond(s.all[i]) {
				snap, at := s.all[i], s.at[i]
				s.mu.Unlock()
				return i, snap, at
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%s: no such snapshot within %s; delivered: %s", what, d, s.describe())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// describe lists the delivered snapshots as state#attempt.
func (s *snapshots) describe() string {
	var out []string
	for _, snap := range s.list() {
		out = append(out, fmt.Sprintf("%s#%d", snap.State, snap.Attempt))
	}
	return strings.Join(out, " ")
}

// delivered waits until c's current snapshot has reached OnSnapshot and
// returns every snapshot delivered so far. Delivery runs on its own
// goroutine in Generation order, so once the current one is in, nothing
// published before it is still on its way.
func (s *snapshots) delivered(t *testing.T, c *Conn) []*Snapshot {
	t.Helper()
	cur := c.Snapshot()
	s.wait(t, 5*time.Second, 0, "delivery of the current snapshot", func(got *Snapshot) bool { return got == cur })
	return s.list()
}

func (s *snapshots) list() []*Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Snapshot(nil), s.all...)
}

// noRetry is a reconnect backoff that keeps a failed Conn failed for the
// length of any test, so tests of one failure see it stay put.
func noRetry(int) time.Duration { return time.Hour }

// fastRetry is a reconnect schedule for tests: every wait is 50 ms.
func fastRetry(int) time.Duration { return 50 * time.Millisecond }

// start creates and starts a Conn, closes it at cleanup, and waits until its
// first connect attempt ended. Unless opts sets a Backoff, a failed
// connection is not retried within the test (noRetry).
func start(t *testing.T, cfg *config.Server, opts Options) *Conn {
	t.Helper()
	if opts.Backoff == nil {
		opts.Backoff = noRetry
	}
	c := New(cfg, opts)
	c.Start(context.Background())
	t.Cleanup(func() { _ = c.Close() })
	select {
	case <-c.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not ready after 30s", cfg.Name)
	}
	return c
}

// waitSnapshot polls until cond holds for the current snapshot.
func waitSnapshot(t *testing.T, c *Conn, d time.Duration, what string, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	s, _, _ := waitPublished(t, c, d, what, cond)
	return s
}

// waitPublished polls c's current snapshot until cond holds and returns it
// with bounds on when it was published: after from (the last look that found
// cond false; the zero time if the first look found it true) and before to.
// Unlike a delivery time, these do not lag behind the publication.
func waitPublished(t *testing.T, c *Conn, d time.Duration, what string, cond func(*Snapshot) bool) (s *Snapshot, from, to time.Time) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		before := time.Now()
		if s := c.Snapshot(); cond(s) {
			return s, from, time.Now()
		}
		from = before
		if before.After(deadline) {
			t.Fatalf("%s: not reached within %s; state %s, err %v", what, d, c.Snapshot().State, c.Snapshot().Err)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustConnected(t *testing.T, c *Conn) *Snapshot {
	t.Helper()
	s := c.Snapshot()
	if s.State != StateConnected {
		t.Fatalf("state %s, err %v; want connected", s.State, s.Err)
	}
	return s
}

// callTool sends tools/call name with args and decodes structuredContent.
func callTool(t *testing.T, c *Conn, name string, args any) map[string]json.RawMessage {
	t.Helper()
	params, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := c.Request(ctx, "tools/call", params)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var res struct {
		Structured map[string]json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("tools/call %s: result %s: %v", name, raw, err)
	}
	return res.Structured
}

func toolNames(tools []Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}
