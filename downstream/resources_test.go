package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A prompt of a server still making its first connection is not unknown:
// prompts/get and completion/complete naming it wait for the connection
// (at most startup_wait, docs/operations.md#startup) and reach the server.
func TestPromptRequestsWaitForFirstConnection(t *testing.T) {
	for _, tt := range []struct {
		method, params, upstreamAnswer string
		wantSent                       string // the params the server gets
	}{
		{"prompts/get", `{"name":"fx__greet"}`, `{"messages":[]}`, `{"name":"greet"}`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"fx__greet"},"argument":{"name":"a","value":""}}`,
			`{"completion":{"values":["x"]}}`, `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"a","value":""}}`},
	} {
		t.Run(tt.method, func(t *testing.T) {
			ready := make(chan struct{})
			fx := &fakeUpstream{ReadyFn: func() <-chan struct{} { return ready }}
			fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnecting, StartupUntil: time.Now().Add(5 * time.Second)})
			fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(tt.upstreamAnswer), nil
			}
			p := newProxy(t, "startup_wait: 5s\nblobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n", map[string]*fakeUpstream{"fx": fx})
			connected := time.AfterFunc(300*time.Millisecond, func() {
				fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnected,
					Capabilities: upstream.Capabilities{Prompts: true, Completions: true},
					Prompts:      []json.RawMessage{json.RawMessage(`{"name":"greet"}`)}})
				close(ready)
			})
			defer connected.Stop()
			got, _ := p.route.answer(context.Background(), reqFor(testState(t, p), tt.method, json.RawMessage(tt.params)))
			if want := `{"jsonrpc":"2.0","id":1,"result":` + tt.upstreamAnswer + `}`; string(got.bytes()) != want {
				t.Errorf("%s right after start answered\n%s\nwant\n%s", tt.method, got.bytes(), want)
			}
			if reqs := fx.requests(); len(reqs) != 1 || reqs[0].Method != tt.method || reqs[0].Params != tt.wantSent {
				t.Errorf("the server got %+v; want one %s %s", reqs, tt.method, tt.wantSent)
			}
		})
	}
}

// A session's first tools/list waits for the servers still making their
// first connection (docs/operations.md#startup). Once a list has seen every server of the
// config ready, later lists do not wait or refresh the catalog again; a
// reload's servers get that check once more.
func TestWaitStartupOncePerGeneration(t *testing.T) {
	ready := make(chan struct{})
	fx := &fakeUpstream{ReadyFn: func() <-chan struct{} { return ready }}
	fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnecting, StartupUntil: time.Now().Add(5 * time.Second)})
	yaml := "startup_wait: 5s\nblobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n"
	p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": fx})
	s := testState(t, p)
	list := func() string {
		got, _ := p.route.answer(context.Background(), reqFor(s, "tools/list", nil))
		return string(got.bytes())
	}
	got := make(chan string, 1)
	go func() { got <- list() }()
	select {
	case g := <-got:
		t.Fatalf("tools/list answered before the server was ready: %s", g)
	case <-time.After(100 * time.Millisecond):
	}
	fx.set(upstream.StateConnected, `{"name":"alpha"}`)
	close(ready)
	if g := <-got; !strings.Contains(g, `"fx__alpha"`) {
		t.Fatalf("the first tools/list after the start = %s; want fx__alpha", g)
	}

	calls := p.catalogs.calls.Load()
	if g := list(); !strings.Contains(g, `"fx__alpha"`) {
		t.Fatalf("a later tools/list = %s; want fx__alpha", g)
	}
	if n := p.catalogs.calls.Load() - calls; n != 0 {
		t.Errorf("a tools/list after every server was ready refreshed the catalog %d times; want 0", n)
	}

	gx := connected(`{"name":"beta"}`)
	p.Reload(parseConfig(t, yaml+"  gx: {command: fixture}\n"), map[string]Upstream{"fx": fx, "gx": gx})
	s = testState(t, p) // a session keeps the grants it started with
	calls = p.catalogs.calls.Load()
	if g := list(); !strings.Contains(g, `"gx__beta"`) {
		t.Fatalf("tools/list after a reload = %s; want gx__beta", g)
	}
	if n := p.catalogs.calls.Load() - calls; n != 1 {
		t.Errorf("the first tools/list after a reload refreshed the catalog %d times; want 1", n)
	}
}

// grantedApart is a proxy with servers a (one tool, aTool) and b, and two
// initialized stdio sessions: aonly, whose agent is granted a only, and
// both, granted both.
func grantedApart(t *testing.T, aTool string, b *fakeUpstream) (*Proxy, *stdioClient, *stdioClient) {
	t.Helper()
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  a: {command: fixture}
  b: {command: fixture}
bundles:
  justa: {servers: [a]}
  all: {servers: [a, b]}
agents:
  aonly: {mcp_bundles: [justa]}
  both: {mcp_bundles: [all]}
default_agent: both
`, map[string]*fakeUpstream{"a": connected(aTool), "b": b})
	aonly := startStdioAs(t, p, context.Background(), "aonly")
	aonly.initialize()
	both := startStdioAs(t, p, context.Background(), "both")
	both.initialize()
	return p, aonly, both
}

// resources/list_changed reaches the sessions granted the server whose
// resources changed, not a session whose agent is not granted it: its
// merged list did not change.
func TestSurfaceListChangedOnlyToGrantedSessions(t *testing.T) {
	b := &fakeUpstream{}
	b.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true},
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"r://1","name":"one"}`)}})
	p, aonly, both := grantedApart(t, `{"name":"x"}`, b)
	b.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true},
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"r://1","name":"one"}`), json.RawMessage(`{"uri":"r://2","name":"two"}`)}})
	p.Refresh()
	const changed = `"notifications/resources/list_changed"`
	for deadline := time.Now().Add(5 * time.Second); both.count(changed) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the session granted b got no resources/list_changed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // both got it: aonly's would be on its way
	if n := aonly.count(changed); n != 0 {
		t.Errorf("the session not granted b got %d resources/list_changed", n)
	}
}
