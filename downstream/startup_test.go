package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
	"github.com/rs/zerolog"
)

// startingProxy is newProxy without its first build: the proxy as the
// runtime makes it, before any upstream's snapshot arrived.
func startingProxy(t *testing.T, yaml string, ups map[string]*fakeUpstream) *Proxy {
	t.Helper()
	m := make(map[string]Upstream, len(ups))
	for name, u := range ups {
		m[name] = u
	}
	return New(Options{Config: parseConfig(t, yaml), Upstreams: m, Logger: zerolog.Nop(), Version: "test"})
}

// A pending start (fx connected, gx still making its first connection)
// and its end.
func pendingStart(t *testing.T, wait string) (p *Proxy, fx, gx *fakeUpstream, gxReady chan struct{}) {
	t.Helper()
	gxReady = make(chan struct{})
	fx = connected(`{"name":"alpha"}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"alpha ran"}]}`), nil
	}
	gx = &fakeUpstream{ReadyFn: func() <-chan struct{} { return gxReady }}
	yaml := "startup_wait: " + wait + "\nblobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n  gx: {command: fixture}\n"
	return startingProxy(t, yaml, map[string]*fakeUpstream{"fx": fx, "gx": gx}), fx, gx, gxReady
}

// While an upstream is still making its first connection, a snapshot
// builds no catalog: no session has seen one yet. When the start ends, the
// next snapshot builds it.
func TestUpstreamChangedWaitsForTheStart(t *testing.T) {
	p, _, gx, gxReady := pendingStart(t, "30s")
	before := p.Catalog()
	p.UpstreamChanged()
	if p.Catalog() != before {
		t.Fatalf("a snapshot during the start built a catalog: %d tools", len(p.Catalog().Tools()))
	}
	gx.set(upstream.StateConnected, `{"name":"beta"}`)
	close(gxReady)
	p.UpstreamChanged()
	var names []string
	for _, e := range p.Catalog().Tools() {
		names = append(names, e.Exposed)
	}
	if strings.Join(names, ",") != "fx__alpha,gx__beta" {
		t.Fatalf("the catalog after the start has %v; want fx__alpha and gx__beta", names)
	}
}

// A call to a tool of a connected server does not wait for the start to
// end: it finds that the catalog lags and builds it (catchUp).
func TestCallDuringStartBuildsTheCatalog(t *testing.T) {
	p, fx, _, _ := pendingStart(t, "30s")
	p.UpstreamChanged()
	done := make(chan string, 1)
	go func() {
		got, _ := p.route.answer(context.Background(), reqFor(testState(t, p), "tools/call", json.RawMessage(`{"name":"fx__alpha","arguments":{}}`)))
		done <- string(got.bytes())
	}()
	select {
	case got := <-done:
		if !strings.Contains(got, "alpha ran") {
			t.Fatalf("tools/call fx__alpha during the start = %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tools/call of a connected server's tool waited for another server's first connection")
	}
	if n := len(fx.requests()); n != 1 {
		t.Errorf("fx got %d requests; want 1", n)
	}
}

// waitStartup builds the catalog when startup_wait is over, although an
// upstream is still connecting.
func TestWaitStartupBuildsAtStartupWait(t *testing.T) {
	p, _, _, _ := pendingStart(t, "200ms")
	p.UpstreamChanged()
	if n := len(p.Catalog().Tools()); n != 0 {
		t.Fatalf("the catalog has %d tools before startup_wait is over; want none built", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.catalogs.waitStartup(ctx)
	if ctx.Err() != nil {
		t.Fatal("WaitStartup did not return when startup_wait was over")
	}
	if e, ok := p.Catalog().Lookup("fx__alpha"); !ok || !e.Connected {
		t.Fatalf("after startup_wait the catalog lacks the connected fx__alpha (%v)", ok)
	}
	// Only the first wait that ran out builds: the lists that follow while
	// gx is still connecting do not queue behind the build lock.
	calls := p.catalogs.calls.Load()
	p.catalogs.waitStartup(ctx)
	if n := p.catalogs.calls.Load() - calls; n != 0 {
		t.Errorf("a second wait after startup_wait refreshed the catalog %d times; want 0", n)
	}
	// Later snapshots build at once.
	before := p.Catalog()
	p.catalogs.mu.Lock()
	p.catalogs.builtGen = nil
	p.catalogs.mu.Unlock()
	p.UpstreamChanged()
	if p.Catalog() == before {
		t.Error("a snapshot after startup_wait built no catalog")
	}
}

// A resources/read of a bare URI (a server with prefix "") made while
// its server is still making its first connection waits for it, as
// prompts/get and tools/call do, instead of answering "Resource not
// found".
func TestBareResourceReadWaitsForFirstConnection(t *testing.T) {
	ready := make(chan struct{})
	fx := &fakeUpstream{ReadyFn: func() <-chan struct{} { return ready }}
	fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnecting, StartupUntil: time.Now().Add(5 * time.Second)})
	fx.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"contents":[{"uri":"file:///a.txt","text":"A"}]}`), nil
	}
	p := newProxy(t, "startup_wait: 5s\nblobs: {mode: passthrough}\nservers:\n  fx: {command: fixture, prefix: \"\"}\n", map[string]*fakeUpstream{"fx": fx})
	connected := time.AfterFunc(300*time.Millisecond, func() {
		fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnected,
			Capabilities: upstream.Capabilities{Resources: true},
			Resources:    []json.RawMessage{json.RawMessage(`{"uri":"file:///a.txt","name":"a"}`)}})
		close(ready)
	})
	defer connected.Stop()
	got, _ := p.route.answer(context.Background(), reqFor(testState(t, p), "resources/read", json.RawMessage(`{"uri":"file:///a.txt"}`)))
	if !strings.Contains(string(got.bytes()), `"text":"A"`) {
		t.Fatalf("resources/read of a bare URI right after start = %s", got.bytes())
	}
	if reqs := fx.requests(); len(reqs) != 1 || reqs[0].Method != "resources/read" || reqs[0].Params != `{"uri":"file:///a.txt"}` {
		t.Errorf("the server got %+v; want one resources/read of file:///a.txt", reqs)
	}
}

// A reload's servers build as they connect, also when the reload comes
// during the start: nothing waits for their start to end, and a session
// may have listed already. hx connects while ix is still connecting, and
// its snapshot arrives before its Ready closes (as the upstream package
// delivers them).
func TestReloadDuringStartBuildsAsServersConnect(t *testing.T) {
	p, fx, gx, gxReady := pendingStart(t, "30s")
	gx.set(upstream.StateConnected, `{"name":"beta"}`)
	close(gxReady)
	p.UpstreamChanged()
	hx, ix := &fakeUpstream{ReadyFn: func() <-chan struct{} { return make(chan struct{}) }}, &fakeUpstream{ReadyFn: func() <-chan struct{} { return make(chan struct{}) }}
	yaml := "startup_wait: 30s\nblobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n  gx: {command: fixture}\n  hx: {command: fixture}\n  ix: {command: fixture}\n"
	p.Reload(parseConfig(t, yaml), map[string]Upstream{"fx": fx, "gx": gx, "hx": hx, "ix": ix})
	hx.set(upstream.StateConnected, `{"name":"delta"}`)
	p.UpstreamChanged()
	if _, ok := p.Catalog().Lookup("hx__delta"); !ok {
		t.Fatal("a server a reload added connected during the start, and its tool is not in the catalog")
	}
}

// The upstream holds one subscription for all the sessions watching a
// resource: one session's unsubscribe does not end another's, and the
// last one's does.
func TestUnsubscribeKeepsOtherSessionsSubscription(t *testing.T) {
	fx := &fakeUpstream{}
	fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnected,
		Capabilities: upstream.Capabilities{Resources: true, ResourcesSubscribe: true},
		Resources:    []json.RawMessage{json.RawMessage(`{"uri":"mem://x","name":"x"}`)}})
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n", map[string]*fakeUpstream{"fx": fx})
	a, b := testState(t, p), testState(t, p)
	send := func(s *session, method string) {
		t.Helper()
		got, _ := p.route.answer(context.Background(), reqFor(s, method, json.RawMessage(`{"uri":"fx+mem://x"}`)))
		if !strings.Contains(string(got.bytes()), `"result":{}`) {
			t.Fatalf("%s = %s", method, got.bytes())
		}
	}
	methods := func() []string {
		var out []string
		for _, r := range fx.requests() {
			out = append(out, r.Method+" "+r.Params)
		}
		return out
	}
	send(a, "resources/subscribe")
	send(b, "resources/subscribe")
	send(a, "resources/unsubscribe")
	if got := methods(); len(got) != 2 || strings.Contains(strings.Join(got, ","), "unsubscribe") {
		t.Fatalf("after one of two sessions unsubscribed the server got %q; want its two subscribes only", got)
	}
	send(b, "resources/unsubscribe")
	if got := methods(); len(got) != 3 || got[2] != `resources/unsubscribe {"uri":"mem://x"}` {
		t.Fatalf("after both unsubscribed the server got %q; want one unsubscribe last", got)
	}
}
