//go:build nginx

package scaleout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Shape of the run.
const (
	numSessions     = 10
	callsPerSession = 3
	testDeadline    = 4 * time.Minute // the scenario after the build
	progressSteps   = 3
	progressStepMS  = 600
)

// session is one client session through nginx.
type session struct {
	n       int
	id      string
	replica string // where its calls ran, from the fixtures' records
	texts   []string
}

func (s *session) text(label string) string { return fmt.Sprintf("s%02d-%s", s.n, label) }

// forEach runs f for every session concurrently and returns the errors.
func forEach(sessions []*session, f func(s *session) error) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(s)
		}()
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// TestScaleOutBehindNginx runs two replicas behind nginx configured with
// deploy/nginx/mcp-proxy.conf, opens sessions through it, checks that every
// call of a session runs on the replica that created it, streams an SSE
// answer through it, then kills one replica: the other's sessions go on,
// and each session of the dead one gets 404 and re-initializes onto the
// live one.
func TestScaleOutBehindNginx(t *testing.T) {
	nginxBinary(t) // fail at once, before building, when nginx is missing
	proxyBin, fixtureBin := buildBinaries(t)
	t.Cleanup(func() {
		// Nothing the test started may outlive it: the replicas' fixtures
		// included (the one of the killed replica ends on stdin EOF).
		for _, name := range []string{"replica-a", "replica-b"} {
			if pids := waitGone(fixtureBin, name, exitTimeout); len(pids) > 0 {
				t.Errorf("the fixture of %s is still running (pids %v); killing it", name, pids)
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})

	a := startReplica(t, proxyBin, fixtureBin, "a")
	b := startReplica(t, proxyBin, fixtureBin, "b")
	ng := startNginx(t, [2]string{a.addr, b.addr})
	t.Cleanup(func() {
		if t.Failed() {
			if log, err := os.ReadFile(ng.accessLog); err == nil {
				t.Logf("nginx access log (tail):\n%s", tail(string(log), 6000))
			}
		}
	})
	t.Logf("replica a %s, replica b %s, nginx %s", a.addr, b.addr, ng.addr)

	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	c := newMCPClient("http://" + ng.addr + "/mcp")
	t.Cleanup(c.hc.CloseIdleConnections)

	// Phase 1: sessions through nginx, calls on each, concurrently.
	start := time.Now()
	sessions := make([]*session, numSessions)
	ids := map[string]bool{}
	for i := range sessions {
		id, err := c.initialize(ctx)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if !strings.HasPrefix(id, "mcp-proxy-") || ids[id] {
			t.Fatalf("session %d: id %q is not a fresh proxy-issued id", i, id)
		}
		ids[id] = true
		sessions[i] = &session{n: i, id: id}
	}
	errs := forEach(sessions, func(s *session) error {
		for k := 1; k <= callsPerSession; k++ {
			text := s.text("c" + strconv.Itoa(k))
			r, err := c.echo(ctx, s.id, text)
			if err != nil {
				return fmt.Errorf("session %d call %d: %w", s.n, k, err)
			}
			if r.status != http.StatusOK {
				return fmt.Errorf("session %d call %d: status %d (%s): a call reached a replica that does not know the session", s.n, k, r.status, r.body)
			}
			s.texts = append(s.texts, text)
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	phase1 := time.Since(start)

	// Where each session's calls ran: all on one replica, each exactly once.
	rec := recorded(t, a, b)
	perReplica := map[string]int{}
	for _, s := range sessions {
		for _, text := range s.texts {
			got := rec[text]
			if len(got) != 1 {
				t.Fatalf("call %s ran %d times (%v), want once", text, len(got), got)
			}
			if s.replica == "" {
				s.replica = got[0]
			} else if got[0] != s.replica {
				t.Fatalf("session %d: call %s ran on replica %s, its earlier calls on %s", s.n, text, got[0], s.replica)
			}
		}
		perReplica[s.replica]++
	}
	if perReplica["a"] == 0 || perReplica["b"] == 0 {
		t.Fatalf("sessions per replica %v: nginx should spread initializes over both", perReplica)
	}
	t.Logf("phase 1: %d sessions (a: %d, b: %d), %d/%d calls ok, each on its session's replica, in %s",
		numSessions, perReplica["a"], perReplica["b"], numSessions*callsPerSession, numSessions*callsPerSession, phase1.Round(time.Millisecond))

	checkStreaming(ctx, t, c, sessions[0])

	// Phase 2: replica a dies.
	killedAt := time.Now()
	a.proc.kill(t)
	if pids := waitGone(fixtureBin, "replica-a", exitTimeout); len(pids) > 0 {
		t.Errorf("the killed replica's fixture still runs %s later (pids %v)", exitTimeout, pids)
	}
	var (
		mu         sync.Mutex
		got404     int
		reinited   int
		first404   time.Duration
		reinitTime []time.Duration
	)
	errs = forEach(sessions, func(s *session) error {
		text := s.text("after")
		r, err := c.echo(ctx, s.id, text)
		if err != nil {
			return fmt.Errorf("session %d (replica %s) after the kill: %w", s.n, s.replica, err)
		}
		if s.replica == "b" {
			if r.status != http.StatusOK {
				return fmt.Errorf("session %d on the live replica: status %d (%s) after the other replica died", s.n, r.status, r.body)
			}
			s.texts = append(s.texts, text)
			return nil
		}
		if r.status != http.StatusNotFound {
			return fmt.Errorf("session %d of the killed replica: status %d (%s), want 404", s.n, r.status, r.body)
		}
		mu.Lock()
		got404++
		if d := time.Since(killedAt); first404 == 0 || d < first404 {
			first404 = d
		}
		mu.Unlock()
		// What an MCP client does on 404: a new session, then the call again.
		t0 := time.Now()
		id, err := c.initialize(ctx)
		if err != nil {
			return fmt.Errorf("session %d re-initialize: %w", s.n, err)
		}
		if id == s.id || ids[id] {
			return fmt.Errorf("session %d re-initialized to id %q, want a new one", s.n, id)
		}
		s.id, s.replica = id, ""
		for _, label := range []string{"reinit1", "reinit2"} {
			text := s.text(label)
			r, err := c.echo(ctx, s.id, text)
			if err != nil {
				return fmt.Errorf("session %d after re-initializing: %w", s.n, err)
			}
			if r.status != http.StatusOK {
				return fmt.Errorf("session %d after re-initializing: status %d (%s)", s.n, r.status, r.body)
			}
			s.texts = append(s.texts, text)
		}
		mu.Lock()
		reinited++
		reinitTime = append(reinitTime, time.Since(t0))
		mu.Unlock()
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The records: every call after the kill ran once, on b; the calls that
	// got 404 ran nowhere.
	rec = recorded(t, a, b)
	for _, s := range sessions {
		if s.replica == "" { // re-initialized
			if got := rec[s.text("after")]; len(got) != 0 {
				t.Errorf("session %d: the call that got 404 ran on %v, want nowhere", s.n, got)
			}
		}
		for _, label := range []string{"after", "reinit1", "reinit2"} {
			text := s.text(label)
			if !slices.Contains(s.texts, text) {
				continue
			}
			if got := rec[text]; len(got) != 1 || got[0] != "b" {
				t.Errorf("call %s ran on %v, want once on b", text, got)
			}
		}
	}
	if got404 != perReplica["a"] || reinited != perReplica["a"] {
		t.Errorf("%d sessions were on a, %d got 404 and %d re-initialized", perReplica["a"], got404, reinited)
	}
	sort.Slice(reinitTime, func(i, j int) bool { return reinitTime[i] < reinitTime[j] })
	if len(reinitTime) > 0 {
		t.Logf("phase 2: replica a SIGKILLed; %d sessions of b went on (%d/%d calls ok); %d sessions of a got 404 (first %s after the kill), "+
			"re-initialized through nginx onto b and made %d/%d calls ok (re-initialize + 2 calls: %s to %s)",
			perReplica["b"], perReplica["b"], perReplica["b"], got404, first404.Round(time.Millisecond), 2*reinited, 2*got404,
			reinitTime[0].Round(time.Millisecond), reinitTime[len(reinitTime)-1].Round(time.Millisecond))
	}

	// DELETE is routed like every other request: each live session ends on
	// its own replica (a mis-routed DELETE would get 404).
	for _, s := range sessions {
		st, err := c.deleteSession(ctx, s.id)
		if err != nil {
			t.Fatalf("DELETE session %d: %v", s.n, err)
		}
		if st != http.StatusOK {
			t.Errorf("DELETE session %d: status %d, want 200", s.n, st)
		}
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("the scenario ran out of its %s: %v", testDeadline, err)
	}
}

// checkStreaming calls the fixture's progress tool through nginx: the
// answer is an event stream, and its progress events must reach the client
// as they are sent, not all at once when the call ends (nginx must not
// buffer it).
func checkStreaming(ctx context.Context, t *testing.T, c *mcpClient, s *session) {
	t.Helper()
	r, err := c.callTool(ctx, s.id, "fx__progress",
		map[string]any{"steps": progressSteps, "ms": progressStepMS}, map[string]any{"progressToken": "scaleout"})
	if err != nil {
		t.Fatalf("fx__progress: %v", err)
	}
	if r.status != http.StatusOK {
		t.Fatalf("fx__progress: status %d (%s)", r.status, r.body)
	}
	var progress []sseEvent
	for _, e := range r.events {
		var n struct {
			Method string `json:"method"`
			Params struct {
				ProgressToken string `json:"progressToken"`
				Progress      int    `json:"progress"`
			} `json:"params"`
		}
		if json.Unmarshal(e.data, &n) != nil || n.Method != "notifications/progress" || n.Params.ProgressToken != "scaleout" {
			continue
		}
		if n.Params.Progress != len(progress)+1 {
			t.Fatalf("fx__progress: progress event %d says step %d", len(progress)+1, n.Params.Progress)
		}
		progress = append(progress, e)
	}
	if len(progress) != progressSteps {
		t.Fatalf("fx__progress: %d progress events before the response, want %d (%d events in all)", len(progress), progressSteps, len(r.events))
	}
	// The fixture waits progressStepMS between steps, so the first event
	// is sent (steps-1)*ms before the response. Buffered, they would
	// arrive together.
	spread := r.respAt.Sub(progress[0].at)
	want := time.Duration((progressSteps-1)*progressStepMS) * time.Millisecond * 3 / 4
	if spread < want {
		t.Fatalf("fx__progress: the first progress event arrived %s before the response, want at least %s: nginx buffered the event stream", spread, want)
	}
	t.Logf("streaming: %d of %d progress events through nginx, the first %s before the response", len(progress), progressSteps, spread.Round(time.Millisecond))
}
