package downstream

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// logLevelUpstream records the logging/setLevel requests it gets.
func logLevelUpstream() (*fakeUpstream, func() []string) {
	u := &fakeUpstream{}
	u.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Logging: true}})
	var mu sync.Mutex
	var levels []string
	u.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "logging/setLevel" {
			l, _ := stringMember(params, "level")
			mu.Lock()
			levels = append(levels, l)
			mu.Unlock()
		}
		return json.RawMessage(`{}`), nil
	}
	return u, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), levels...)
	}
}

// logging/setLevel reaches only the servers the session's agent is granted;
// each server gets the most verbose level of the sessions granted it.
func TestSetLevelReachesGrantedServersOnly(t *testing.T) {
	fx, fxLevels := logLevelUpstream()
	gx, gxLevels := logLevelUpstream()
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
  gx: {command: fixture}
bundles:
  f: {servers: [fx]}
  g: {servers: [gx]}
agents:
  a: {mcp_bundles: [f]}
  b: {mcp_bundles: [g]}
`, map[string]*fakeUpstream{"fx": fx, "gx": gx})
	sa, _ := testSession(p, "a", nil)
	sb, _ := testSession(p, "b", nil)
	p.sessions.add(sa)
	p.sessions.add(sb)
	setLevelOf(t, p, sb, "debug")
	levelsSent(p)
	wantLevels(t, "gx", gxLevels, "debug")
	wantLevels(t, "fx (not granted to b)", fxLevels)
	setLevelOf(t, p, sa, "warning")
	levelsSent(p)
	wantLevels(t, "fx", fxLevels, "warning")
	wantLevels(t, "gx (untouched by a's level)", gxLevels, "debug")
	sa2, _ := testSession(p, "a", nil)
	p.sessions.add(sa2)
	setLevelOf(t, p, sa2, "error") // less verbose than a's other session: fx keeps warning
	levelsSent(p)
	wantLevels(t, "fx", fxLevels, "warning")
	wantLevels(t, "gx", gxLevels, "debug")
}

// levelsSent waits until every level wanted so far has been passed on and
// no goroutine is left to pass on another: after it, what the upstreams
// got is final until the next change.
func levelsSent(p *Proxy) { p.relay.levels.senders.Wait() }

// wantLevels checks the logging/setLevel requests an upstream received,
// in order, now: call it after levelsSent.
func wantLevels(t *testing.T, what string, got func() []string, want ...string) {
	t.Helper()
	if g := got(); !slices.Equal(g, want) {
		t.Errorf("%s got levels %v, want %v", what, g, want)
	}
}

// waitLevels waits until got returns want (the logging/setLevel requests an
// upstream received, in order), failing the test after 5 s.
func waitLevels(t *testing.T, what string, got func() []string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(got(), want) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if g := got(); !slices.Equal(g, want) {
		t.Errorf("%s got levels %v, want %v", what, g, want)
	}
}

// setLevelOf sends a session's logging/setLevel through the proxy.
func setLevelOf(t *testing.T, p *Proxy, s *session, level string) {
	t.Helper()
	if _, werr := p.lifecycle.setLevel(context.Background(), reqFor(s, "logging/setLevel", json.RawMessage(`{"level":"`+level+`"}`))); werr != nil {
		t.Fatal(werr)
	}
}

// A server that a reload restarts (a new connection) or adds is told the
// level its sessions set before the reload; a server the reload keeps is
// not told again.
func TestReloadedServerGetsTheLevel(t *testing.T) {
	const before = "blobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n  gx: {command: fixture}\n"
	const after = "blobs: {mode: passthrough}\nservers:\n  fx: {command: fixture, args: [changed]}\n  gx: {command: fixture}\n"
	fx, fxLevels := logLevelUpstream()
	gx, gxLevels := logLevelUpstream()
	p := newProxy(t, before, map[string]*fakeUpstream{"fx": fx, "gx": gx})
	s := testState(t, p)
	p.sessions.add(s)
	setLevelOf(t, p, s, "debug")
	waitLevels(t, "fx", fxLevels, "debug")
	waitLevels(t, "gx", gxLevels, "debug")

	fx2, fx2Levels := logLevelUpstream()
	p.Reload(parseConfig(t, after), map[string]Upstream{"fx": fx2, "gx": gx})
	levelsSent(p)
	wantLevels(t, "the restarted fx", fx2Levels, "debug")
	wantLevels(t, "the old fx", fxLevels, "debug")
	wantLevels(t, "gx (kept by the reload)", gxLevels, "debug")

	setLevelOf(t, p, s, "warning")
	levelsSent(p)
	wantLevels(t, "the restarted fx", fx2Levels, "debug", "warning")
	wantLevels(t, "the old fx (closed by the reload)", fxLevels, "debug")
	wantLevels(t, "gx", gxLevels, "debug", "warning")
}

// When a session ends, its level no longer counts: the server gets the
// most verbose level of the sessions left.
func TestLevelRecomputedWhenSessionEnds(t *testing.T) {
	fx, levels := logLevelUpstream()
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	verbose, _ := testSession(p, "", nil)
	quiet, _ := testSession(p, "", nil)
	p.sessions.add(verbose)
	p.sessions.add(quiet)
	setLevelOf(t, p, verbose, "debug")
	setLevelOf(t, p, quiet, "error")
	waitLevels(t, "fx", levels, "debug")
	p.sessions.remove(verbose)
	waitLevels(t, "fx after the debug session ended", levels, "debug", "error")
}

// Two quick changes reach the server in the order they were made, and
// neither waits for the server: the last level set is the one it keeps.
func TestLevelChangesApplyInOrder(t *testing.T) {
	fx, levels := logLevelUpstream()
	record := fx.RequestFn
	sending, release := make(chan struct{}), make(chan struct{})
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if l, _ := stringMember(params, "level"); l == "debug" {
			close(sending)
			<-release // the server is slow to take the first level
		}
		return record(ctx, method, params)
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	s := testState(t, p)
	p.sessions.add(s)
	setLevelOf(t, p, s, "debug")
	<-sending
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		setLevelOf(t, p, s, "error")
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("logging/setLevel waited for the upstream to take the previous level")
	}
	close(release)
	waitLevels(t, "fx", levels, "debug", "error")
}

// Each session receives the upstream's log messages at or above its own
// level, whatever level the server was told (the most verbose of all).
func TestEachSessionGetsItsOwnLevel(t *testing.T) {
	fx, levels := logLevelUpstream()
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	type client struct {
		s   *session
		out *recordStream
	}
	open := func(level string) client {
		s, _ := testSession(p, "", nil)
		s.state.SetClient(clientInfo{version: "2025-11-25"}) // a session-era client, as after initialize
		s.open.Store(true)
		out := &recordStream{}
		s.notify.attach(out)
		p.sessions.add(s)
		if level != "" {
			setLevelOf(t, p, s, level)
		}
		return client{s, out}
	}
	debug, warning, unset := open("debug"), open("warning"), open("")
	waitLevels(t, "fx", levels, "debug")
	for _, l := range []string{"debug", "info", "warning", "error"} {
		p.OnUpstreamNotification("fx", "notifications/message", json.RawMessage(`{"level":"`+l+`","data":"at `+l+`"}`))
	}
	msg := func(l string) string {
		return `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"` + l + `","data":"at ` + l + `","logger":"fx"}}`
	}
	for _, c := range []struct {
		name string
		got  *recordStream
		want []string
	}{
		{"the debug session", debug.out, []string{msg("debug"), msg("info"), msg("warning"), msg("error")}},
		{"the warning session", warning.out, []string{msg("warning"), msg("error")}},
		{"a session that set no level", unset.out, []string{msg("debug"), msg("info"), msg("warning"), msg("error")}},
	} {
		if got := c.got.messages(); !slices.Equal(got, c.want) {
			t.Errorf("%s received\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}
