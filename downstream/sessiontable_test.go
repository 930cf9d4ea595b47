package downstream

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// The store binds each HTTP session to its agent, keeps the sessions
// gauge, forgets ended sessions, and closes idle ones only.
func TestSessionStore(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	st := newSessionTable(m)
	var removed []string
	st.onRemove = func(s *session) { removed = append(removed, s.id) }
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
bundles:
  all: {servers: [fx]}
agents:
  a: {mcp_bundles: [all]}
  b: {mcp_bundles: [all]}
`, map[string]*fakeUpstream{"fx": connected()})
	a, _ := p.views.resolveAgent("a")
	b, _ := p.views.resolveAgent("b")
	sa, sb := newSession(newID(), transportHTTP, a, nil), newSession(newID(), transportHTTP, b, nil)
	st.add(sa)
	st.add(sb)
	gauge := func(agent string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "mcp_proxy_sessions_active" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["agent"] == agent && labels["transport"] == transportHTTP {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	if gauge("a") != 1 || gauge("b") != 1 {
		t.Fatalf("gauge a=%v b=%v, want 1 and 1", gauge("a"), gauge("b"))
	}
	sa.principal = principal{subject: "alice"}
	alice, bob := client{agent: "a", principal: principal{subject: "alice"}}, client{agent: "a", principal: principal{subject: "bob"}}
	if st.lookup(alice, sa.id) != sa || st.lookup(client{agent: "b"}, sa.id) != nil || st.lookup(bob, sa.id) != nil ||
		st.lookup(alice, "mcp-proxy-unknown") != nil {
		t.Error("a session id is found on another agent's endpoint or by another user, or an unknown one is found")
	}
	sb.activity.begin() // a stream stays open
	sa.activity.last.Store(time.Now().Add(-time.Hour).UnixNano())
	sb.activity.last.Store(time.Now().Add(-time.Hour).UnixNano())
	if n := st.closeIdle(time.Minute); n != 1 || st.lookup(alice, sa.id) != nil || st.lookup(client{agent: "b"}, sb.id) != sb {
		t.Errorf("closeIdle closed %d; want only the session with nothing open", n)
	}
	if !sa.ended() || gauge("a") != 0 {
		t.Errorf("the idle session did not end (ended %v, gauge %v)", sa.ended(), gauge("a"))
	}
	// A session acquired for a request is busy until the request ends;
	// one the sweep closed cannot be acquired.
	sb.activity.end()
	if got, _, _ := st.acquire(t.Context(), client{agent: "b"}, sb.id, ""); got != sb {
		t.Fatal("acquire did not find a live session")
	}
	sb.activity.last.Store(time.Now().Add(-time.Hour).UnixNano())
	if n := st.closeIdle(time.Minute); n != 0 {
		t.Errorf("closeIdle closed %d sessions, one with a request begun on it", n)
	}
	sb.activity.end()
	sb.activity.last.Store(time.Now().Add(-time.Hour).UnixNano())
	if n := st.closeIdle(time.Minute); n != 1 || acquired(t, st, client{agent: "b"}, sb.id) != nil {
		t.Errorf("closeIdle closed %d; the idle session must close and be unknown to acquire", n)
	}
	st.remove(sb)
	st.remove(sb)
	if gauge("b") != 0 || len(removed) != 2 {
		t.Errorf("gauge b=%v after remove, removals %v; want 0 and two (once each)", gauge("b"), removed)
	}
}

// acquired is st.acquire's session, failing t on an error.
func acquired(t *testing.T, st *sessionTable, c client, id string) *session {
	t.Helper()
	s, _, err := st.acquire(t.Context(), c, id, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
