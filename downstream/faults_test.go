package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// An upstream tool exposed bare as "tool_search" (prefix "") is an upstream
// tool like any other: under autonomy supervised it needs approval. Only
// the proxy's own tool_search is never asked about.
func TestUpstreamToolSearchNeedsApproval(t *testing.T) {
	fx := connected(`{"name":"tool_search","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		t.Error("the upstream tool ran without approval")
		return json.RawMessage(`{"content":[]}`), nil
	}
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture, prefix: ""}
bundles:
  all: {servers: [fx]}
agents:
  dev: {mcp_bundles: [all], autonomy: supervised}
default_agent: dev
`, map[string]*fakeUpstream{"fx": fx})
	res, err := p.CallTool(context.Background(), "", nil, "tool_search", json.RawMessage(`{"query":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := resultText(t, res); !isErr || !strings.Contains(text, "needs approval") {
		t.Errorf("result = %s; want the refusal of a call that needs approval", res)
	}
}

// A stateless client's approval answer is good once, for the call it was
// asked about, and only until the approval timeout (docs/agents.md#approval): a replayed
// answer runs nothing.
func TestStatelessApprovalIsSingleUse(t *testing.T) {
	fx := connected(echoTool)
	var mu sync.Mutex
	ran := 0
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		ran++
		mu.Unlock()
		return json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`), nil
	}
	m := map[string]Upstream{"fx": fx}
	// Long enough for a loaded machine to ask and answer within it; the late
	// answer below waits it out.
	const approvalTimeout = 2 * time.Second
	p := New(Options{Config: parseConfig(t, supervisedYAML), Upstreams: m, Logger: testLogger(), ApprovalTimeout: approvalTimeout, Version: "test"})
	p.Refresh()
	url := startHTTP(t, p).URL + "/mcp"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	ask := func(args string) string {
		t.Helper()
		first := statelessCall(t, url, `{"name":"fx__echo","arguments":`+args+`,`+meta+`}`)
		state := regexp.MustCompile(`"requestState":"(px-approval-[0-9a-f]+)"`).FindStringSubmatch(first[len(first)-1])
		if state == nil {
			t.Fatalf("first reply = %q; want an approval question", first)
		}
		return state[1]
	}
	answer := func(args, state string) string {
		t.Helper()
		got := statelessCall(t, url, `{"name":"fx__echo","arguments":`+args+`,"requestState":"`+state+`",`+
			`"inputResponses":{"mcp-proxy/approval":{"action":"accept","content":{"decision":"approve"}}},`+meta+`}`)
		return got[len(got)-1]
	}
	state := ask(`{"x":1}`)
	if got := answer(`{"x":1}`, state); !strings.Contains(got, `"text":"ran"`) {
		t.Fatalf("approved call = %s", got)
	}
	for range 2 {
		if got := answer(`{"x":1}`, state); !strings.Contains(got, "already used") {
			t.Errorf("replayed approval = %s; want a refusal", got)
		}
	}
	other := ask(`{"x":1}`)
	if got := answer(`{"x":2}`, other); !strings.Contains(got, "belongs to another call") {
		t.Errorf("approval moved to other arguments = %s; want a refusal", got)
	}
	late := ask(`{"x":3}`)
	time.Sleep(approvalTimeout + 100*time.Millisecond) // the question was asked before ask returned
	if got := answer(`{"x":3}`, late); !strings.Contains(got, "after the approval timeout") {
		t.Errorf("late approval = %s; want a refusal", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran != 1 {
		t.Errorf("the tool ran %d times, want once", ran)
	}
}

// A dynamic tool_filter_group woken by a tool_search query lists its tools
// in deferred mode too, not only the tools the search returned.
func TestDynamicGroupInDeferredMode(t *testing.T) {
	var tools []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		tools = append(tools, `{"name":"note_`+n+`","description":"Note `+n+`.","inputSchema":{"type":"object"}}`)
	}
	fx := connected(tools...)
	p := newProxy(t, `
startup_wait: 1s
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
bundles:
  all: {servers: [fx]}
agents:
  dev:
    mcp_bundles: [all]
    deferred_loading: true
    tool_filter_groups: [{mode: dynamic, tools: ["fx__note_*"], keywords: [notes]}]
default_agent: dev
`, map[string]*fakeUpstream{"fx": fx})
	st, _ := testSession(p, "dev", nil)
	before := listedNames(t, p.views.listFor(st))
	if slices.Contains(before, "fx__note_a") {
		t.Fatalf("listed before any query: %v", before)
	}
	if _, werr := p.calls.forwardCall(context.Background(), reqFor(st, "tools/call", nil), "tool_search",
		json.RawMessage(`{"query":"show my notes","max_results":1}`), nil); werr != nil {
		t.Fatal(werr)
	}
	after := listedNames(t, p.views.listFor(st))
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		if !slices.Contains(after, "fx__note_"+n) {
			t.Errorf("fx__note_%s not listed after a query naming the group's keyword: %v", n, after)
		}
	}
}

// rootsUpstream is a fake upstream that records its notifications.
type rootsUpstream struct {
	*fakeUpstream
	mu    sync.Mutex
	notes []string
}

func (r *rootsUpstream) Notify(_ context.Context, method string, _ json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, method)
	return nil
}

// A roots/list no call owns is answered (docs/protocol.md#requests-from-servers): over stdio by the one
// client when it has roots, else with the server's configured roots, else
// an empty list. A client's roots/list_changed reaches the servers its
// agent is granted.
func TestRootsWithoutCall(t *testing.T) {
	fx := &rootsUpstream{fakeUpstream: connected()}
	gx := connected()
	p := New(Options{Config: parseConfig(t, `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture, roots: [{uri: "file:///srv/data", name: data}]}
  gx: {command: fixture}
`), Upstreams: map[string]Upstream{"fx": fx, "gx": gx}, Logger: testLogger(), Version: "test"})
	p.Refresh()
	ctx := context.Background()
	for srv, want := range map[string]string{"fx": `{"roots":[{"uri":"file:///srv/data","name":"data"}]}`, "gx": `{"roots":[]}`} {
		got, err := p.OnUpstreamRequest(ctx, srv, "roots/list", nil)
		if err != nil || string(got) != want {
			t.Errorf("%s without any client: %s, %v; want %s", srv, got, err, want)
		}
	}
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}}}}`)
	c.recv(`0`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	done := make(chan string, 1)
	go func() {
		got, err := p.OnUpstreamRequest(ctx, "gx", "roots/list", nil)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(got)
	}()
	var ask string
	for ask == "" {
		if l := c.next(); strings.Contains(l, `"method":"roots/list"`) {
			ask = l
		}
	}
	id := regexp.MustCompile(`"id":(\d+)`).FindStringSubmatch(ask)[1]
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"roots":[{"uri":"file:///home/me"}]}}`)
	if got := <-done; got != `{"roots":[{"uri":"file:///home/me"}]}` {
		t.Errorf("over stdio the client's answer is relayed: got %s", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		fx.mu.Lock()
		n := slices.Contains(fx.notes, "notifications/roots/list_changed")
		fx.mu.Unlock()
		if n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's roots/list_changed did not reach the upstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A tool that collides with one a host has seen does not take its name, and
// a rule naming the tool keeps matching it and the newcomer (both have the
// name before the suffix): the excluded tool never runs (docs/agents.md#names, docs/agents.md#agents-bundles-and-policy).
func TestCollisionKeepsNamesAndRules(t *testing.T) {
	fx := connected(`{"name":"del_file","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		t.Error("an excluded tool ran")
		return json.RawMessage(`{"content":[]}`), nil
	}
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx1: {command: fixture}
bundles:
  all: {servers: [fx1]}
agents:
  dev: {mcp_bundles: [all], excluded_tools: [fx1__del_file]}
default_agent: dev
`, map[string]*fakeUpstream{"fx1": fx})
	fx.set(upstream.StateConnected, `{"name":"del_file","inputSchema":{"type":"object"}}`, `{"name":"del.file","inputSchema":{"type":"object"}}`)
	p.Refresh()
	var names []string
	for _, e := range p.Catalog().Tools() {
		names = append(names, e.Exposed)
	}
	if len(names) != 2 || !slices.Contains(names, "fx1__del_file") {
		t.Fatalf("names after the collision: %v; want del_file to keep fx1__del_file", names)
	}
	for _, n := range names {
		res, err := p.CallTool(context.Background(), "", nil, n, json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if text, isErr := resultText(t, res); !isErr || !strings.Contains(text, "denied by excluded_tools") {
			t.Errorf("%s = %s; want the excluded_tools denial", n, res)
		}
	}
}

// A call to a tool of a granted server that never listed its tools (it is
// down) says the server is down and why; for an agent not granted the
// server it stays "unknown tool" (docs/agents.md#the-policy-rules, rule 1).
func TestUnknownToolOfDownServer(t *testing.T) {
	mem := &fakeUpstream{}
	mem.snap.Store(&upstream.Snapshot{State: upstream.StateFailed, Err: errors.New("process exited with status 1; last stderr: npm error 404")})
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  memory: {command: fixture}
bundles:
  mem: {servers: [memory]}
agents:
  a: {mcp_bundles: [mem]}
  b: {mcp_bundles: []}
`, map[string]*fakeUpstream{"memory": mem})
	_, err := p.CallTool(context.Background(), "a", nil, "memory__read_graph", nil)
	if werr := callError(t, err); werr.Code != codeServerError || !strings.HasPrefix(werr.Message, "MCP server 'memory' is not connected") ||
		!strings.Contains(werr.Message, "npm error 404") {
		t.Errorf("granted: %+v", werr)
	}
	_, err = p.CallTool(context.Background(), "b", nil, "memory__read_graph", nil)
	if werr := callError(t, err); werr.Code != codeInvalidParams || werr.Message != "unknown tool: memory__read_graph" {
		t.Errorf("not granted: %+v", werr)
	}
}
