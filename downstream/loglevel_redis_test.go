//go:build redis

package downstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

const levelReplicasYAML = `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
bundles:
  all: {servers: [fx]}
agents:
  a: {mcp_bundles: [all]}
default_agent: a
`

// TestLevelSetOnAnotherReplica: a session's logging/setLevel, made on one
// replica, reaches the upstream of another replica before that replica
// answers the session's first request there, and again when the level
// changes on the first replica: each replica's server logs at the level
// the client asked for, whichever replica serves it. A request that
// brings no change tells the upstream nothing again.
func TestLevelSetOnAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	var levels []func() []string
	var urls []string
	var ps []*Proxy
	for range 2 {
		up, got := logLevelUpstream()
		p := New(Options{Config: parseConfig(t, levelReplicasYAML), Upstreams: map[string]Upstream{"fx": up}, Logger: zerolog.Nop(),
			Version: "test", Store: redisStore(t, srv)})
		p.Refresh()
		ps = append(ps, p)
		levels = append(levels, got)
		urls = append(urls, startHTTP(t, p).URL+"/mcp")
	}
	c := &httpClient{t: t, url: urls[0]}
	c.initialize()
	at := func(i int) *httpClient { return &httpClient{t: t, url: urls[i], session: c.session} }
	post := func(i int, msg string) {
		t.Helper()
		if r := at(i).post(msg); r.status != http.StatusOK {
			t.Fatalf("replica %d: %s: %d %s", i+1, msg, r.status, r.body)
		}
	}
	want := func(i int, want ...string) {
		t.Helper()
		if got := levels[i](); !slices.Equal(got, want) {
			t.Errorf("replica %d's upstream got levels %v, want %v", i+1, got, want)
		}
	}

	post(0, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}`)
	post(1, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	want(1, "error")
	post(1, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	want(1, "error")
	post(0, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`)
	// A level is read from replica 2's copy of the session, which the
	// change reaches after its announcement's delay.
	announced(t, ps[1])
	post(1, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	want(1, "error", "debug")
}

// TestLevelReachesUpstreamBeforeSiblingRequest: a session's level, set on
// one replica, is being passed to another replica's upstream by the first
// request that brought it there; a second request of the session reaching
// that replica meanwhile (it reads no change: the first already loaded the
// level) waits too, so its tools/call reaches the upstream only after the
// level does. The upstream holds the logging/setLevel until the second
// request is waiting, or until its tools/call arrives (the bug).
func TestLevelReachesUpstreamBeforeSiblingRequest(t *testing.T) {
	srv := redistest.Start(t)
	first, _ := logLevelUpstream()
	p0 := New(Options{Config: parseConfig(t, levelReplicasYAML), Upstreams: map[string]Upstream{"fx": first}, Logger: zerolog.Nop(),
		Version: "test", Store: redisStore(t, srv)})
	p0.Refresh()

	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	entered, waiting, callArrived := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var enterOnce, waitOnce, callOnce sync.Once
	second := &fakeUpstream{}
	second.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Logging: true},
		Tools: []upstream.Tool{rawTool(`{"name":"echo","inputSchema":{"type":"object"}}`)}})
	second.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "logging/setLevel":
			enterOnce.Do(func() { close(entered) })
			select {
			case <-waiting:
			case <-callArrived:
			}
			l, _ := stringMember(params, "level")
			record("setLevel " + l)
			return json.RawMessage(`{}`), nil
		case "tools/call":
			record("tools/call") // before the setLevel it lets go records its own
			callOnce.Do(func() { close(callArrived) })
			return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
		}
		return json.RawMessage(`{}`), nil
	}
	p1 := New(Options{Config: parseConfig(t, levelReplicasYAML), Upstreams: map[string]Upstream{"fx": second}, Logger: zerolog.Nop(),
		Version: "test", Store: redisStore(t, srv)})
	p1.Refresh()
	p1.sessions.levelWaiting = func() { waitOnce.Do(func() { close(waiting) }) }
	urls := []string{startHTTP(t, p0).URL + "/mcp", startHTTP(t, p1).URL + "/mcp"}

	c := &httpClient{t: t, url: urls[0]}
	c.initialize()
	if r := c.post(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}`); r.status != http.StatusOK {
		t.Fatalf("logging/setLevel: %d %s", r.status, r.body)
	}
	// post runs in a goroutine of its own: it reports, never fails the test.
	post := func(msg string, out *string) func() {
		return func() {
			req, err := http.NewRequest(http.MethodPost, urls[1], strings.NewReader(msg))
			if err != nil {
				*out = err.Error()
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", c.session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				*out = err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			*out = resp.Status + " " + string(b)
		}
	}
	var wg sync.WaitGroup
	var ping, call string
	wg.Go(post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`, &ping))
	<-entered
	wg.Go(post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`, &call))
	wg.Wait()
	if !strings.HasPrefix(ping, "200 ") || !strings.HasPrefix(call, "200 ") || !strings.Contains(call, `"text":"ok"`) {
		t.Fatalf("ping: %s\ntools/call: %s", ping, call)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"setLevel error", "tools/call"}; !slices.Equal(events, want) {
		t.Errorf("the second replica's upstream got %q, want %q (the call before its session's level)", events, want)
	}
}
