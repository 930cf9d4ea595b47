//go:build redis

package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/store"
)

const tripsYAML = `
servers:
  fx: {command: fixture, timeout: 5s, limits: {per_minute: 1000, max_concurrent: 1}}
bundles:
  all: {servers: [fx]}
agents:
  bot:
    mcp_bundles: [all]
    limits: [{tools: ["*"], per_minute: 1000}]
default_agent: bot
`

// tripsStore opens a Redis store on srv whose operations reg counts.
func tripsStore(t *testing.T, srv *redistest.Server, reg *prometheus.Registry) *store.Store {
	t.Helper()
	m, err := metrics.NewStore(reg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "mcp-proxy:", EncryptionKey: testStoreKey},
		store.Options{Logger: zerolog.Nop(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestLimitedCallRoundTrips: with a Redis store, a call under a per_minute
// and a max_concurrent limit, on an HTTP session, costs one round trip
// before it runs (the session's read, the tokens and the slot's lease in
// one script; the take alone once the replica's copy of the session is
// current) and one after (the release, sent once the answer is on its
// way); the lease is held while the call runs upstream.
func TestLimitedCallRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewRegistry()
	st := tripsStore(t, srv, reg)
	slots := st.Limits().SlotsKey("fx", 1)
	held := make(chan int64, 3)
	fx := connected(`{"name":"alpha","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		n, err := st.Redis().Client().ZCard(ctx, slots).Result()
		if err != nil {
			return nil, err
		}
		held <- n
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	p := New(Options{Config: parseConfig(t, tripsYAML), Upstreams: map[string]Upstream{"fx": fx},
		Logger: zerolog.Nop(), Version: "test", Store: st})
	p.Refresh()
	c := &httpClient{t: t, url: startHTTP(t, p).URL + "/mcp"}
	c.initialize()
	announced(t, p) // initialize's writes, whose announcements drop the copy
	before := storeCounts(t, reg)
	const calls = 3
	for i := range calls {
		r := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__alpha","arguments":{}}}`, i+1))
		if r.status != http.StatusOK || !strings.Contains(r.body, `"text":"ok"`) {
			t.Fatalf("call %d: %d %s", i+1, r.status, r.body)
		}
		if n := <-held; n != 1 {
			t.Errorf("call %d ran upstream with %d leases held, want its own", i+1, n)
		}
		// The release is sent after the answer, in the background.
		if err := st.Limits().Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The first call reads the session with its take; the others find its
	// copy current and take alone.
	if got, want := opsSince(t, reg, before), "limit_take ok 2, session_load_limit_take ok 1, slot_release ok 3"; got != want {
		t.Errorf("store operations of %d calls (the store's upkeep left out): %s, want %s", calls, got, want)
	}
	if n, err := st.Redis().Client().ZCard(t.Context(), slots).Result(); err != nil || n != 0 {
		t.Errorf("%d leases left after the calls (%v), want 0", n, err)
	}
}

const prepaidYAML = `
servers:
  fx: {command: fixture, timeout: 5s, limits: {max_concurrent: 1}}
bundles:
  all: {servers: [fx]}
agents:
  bot:
    mcp_bundles: [all]
    excluded_tools: [fx__beta]
    limits: [{tools: ["*"], per_minute: 1}]
default_agent: bot
`

// TestPrepaidGivenBack: the limits a tools/call takes with its session's
// read go back when the call does not run under them: the session was
// gone from the store (the call is answered "Session not found"), or the
// call named a tool the policy denies, or one the catalog does not have.
// The agent's one call a minute is still there for the call that runs,
// and no lease is left.
func TestPrepaidGivenBack(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewRegistry()
	st := tripsStore(t, srv, reg)
	fx := connected(`{"name":"alpha","inputSchema":{"type":"object"}}`, `{"name":"beta","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	p := New(Options{Config: parseConfig(t, prepaidYAML), Upstreams: map[string]Upstream{"fx": fx},
		Logger: zerolog.Nop(), Version: "test", Store: st})
	p.Refresh()
	url := startHTTP(t, p).URL + "/mcp"
	call := func(c *httpClient, tool string) httpReply {
		return c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`)
	}

	gone := &httpClient{t: t, url: url}
	gone.initialize()
	if err := st.Sessions(time.Hour).Delete(t.Context(), gone.session); err != nil {
		t.Fatal(err)
	}
	if r := call(gone, "fx__alpha"); r.status != http.StatusNotFound || !strings.Contains(r.body, "Session not found") {
		t.Errorf("call on a session gone from the store: %d %s", r.status, r.body)
	}

	c := &httpClient{t: t, url: url}
	c.initialize()
	if r := call(c, "fx__beta"); !strings.Contains(r.body, "is denied by excluded_tools") {
		t.Errorf("call of a denied tool: %d %s", r.status, r.body)
	}
	if r := call(c, "fx__nope"); !strings.Contains(r.body, "unknown tool") {
		t.Errorf("call of an unknown tool: %d %s", r.status, r.body)
	}
	if r := call(c, "fx__alpha"); r.status != http.StatusOK || !strings.Contains(r.body, `"text":"ok"`) {
		t.Errorf("the agent's one call of the minute: %d %s", r.status, r.body)
	}
	if r := call(c, "fx__alpha"); !strings.Contains(r.body, "rate_limited") {
		t.Errorf("a second call in the minute: %d %s, want it rate_limited", r.status, r.body)
	}
	if err := st.Limits().Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Redis().Client().ZCard(t.Context(), st.Limits().SlotsKey("fx", 1)).Result(); err != nil || n != 0 {
		t.Errorf("%d leases left after the calls (%v), want 0", n, err)
	}
}

// storeCounts is mcp_proxy_store_requests_total by "op outcome".
func storeCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "mcp_proxy_store_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			// The store's own upkeep runs beside the calls, on its own
			// clock: the ping, the replica's liveness key and its inbox.
			if op := labels["op"]; op != "ping" && op != "replica_alive" && op != "inbox_read" {
				counts[labels["op"]+" "+labels["outcome"]] = m.GetCounter().GetValue()
			}
		}
	}
	return counts
}

// opsSince lists the store operations since before as "op outcome n, ...".
func opsSince(t *testing.T, reg *prometheus.Registry, before map[string]float64) string {
	t.Helper()
	var out []string
	for k, n := range storeCounts(t, reg) {
		if d := n - before[k]; d != 0 {
			out = append(out, fmt.Sprintf("%s %g", k, d))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// TestReleaseAfterTheAnswer: a limited call is answered without waiting
// for its lease's release, and a release Redis does not take at first
// (it is paused for writes from the moment the call runs upstream until
// the answer is in) is sent again until it is taken: no lease is left,
// long before the lease (the server's 60 s timeout) would have ended.
func TestReleaseAfterTheAnswer(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewRegistry()
	st := tripsStore(t, srv, reg)
	slots := st.Limits().SlotsKey("fx", 1)
	rc := st.Redis().Client()
	fx := connected(`{"name":"alpha","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		if err := rc.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	yaml := strings.Replace(tripsYAML, "timeout: 5s", "timeout: 60s", 1)
	p := New(Options{Config: parseConfig(t, yaml), Upstreams: map[string]Upstream{"fx": fx},
		Logger: zerolog.Nop(), Version: "test", Store: st})
	p.Refresh()
	c := &httpClient{t: t, url: startHTTP(t, p).URL + "/mcp"}
	c.initialize()
	r := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__alpha","arguments":{}}}`)
	if r.status != http.StatusOK || !strings.Contains(r.body, `"text":"ok"`) {
		t.Fatalf("call: %d %s", r.status, r.body)
	}
	// Reads go through a write pause: the lease is still held.
	if n, err := rc.ZCard(t.Context(), slots).Result(); err != nil || n != 1 {
		t.Errorf("%d leases held when the answer came (%v), want the call's", n, err)
	}
	if err := rc.Do(t.Context(), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := st.Limits().Settle(ctx); err != nil {
		t.Fatalf("the release was not taken once Redis took writes again: %v", err)
	}
	if n, err := rc.ZCard(t.Context(), slots).Result(); err != nil || n != 0 {
		t.Errorf("%d leases left (%v), want 0", n, err)
	}
}

// TestPrepaidRidesOnItsRequest: the limits a tools/call took with its
// session's read travel on the request the transport routed with them
// (inbound.prepaid), and rateGate uses them without asking the store
// again: a prepaid whose take was refused answers the call rate_limited
// with no store operation. A request routed without one takes its own.
func TestPrepaidRidesOnItsRequest(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewRegistry()
	st := tripsStore(t, srv, reg)
	fx := connected(`{"name":"alpha","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	p := New(Options{Config: parseConfig(t, prepaidYAML), Upstreams: map[string]Upstream{"fx": fx},
		Logger: zerolog.Nop(), Version: "test", Store: st})
	p.Refresh()
	a, err := p.views.resolveAgent("bot")
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(newID(), transportHTTP, a, nil)
	defer s.close()
	route := func(id int, in inbound) string {
		m, err := parseMessage(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__alpha","arguments":{}}}`, id))
		if err != nil {
			t.Fatal(err)
		}
		refusal, _, run := p.route.receiveMessage(t.Context(), s, m, noStream{}, in)
		if run == nil {
			t.Fatalf("call %d refused: %s", id, refusal)
		}
		rep, _ := run()
		return string(rep.bytes())
	}

	pre := p.calls.prepay(s, "fx__alpha")
	if pre == nil {
		t.Fatal("no prepaid for a limited call")
	}
	pre.took = store.TakeResult{Refused: 0, Wait: 30 * time.Second} // the agent's limit refused it
	before := storeCounts(t, reg)
	if got := route(1, inbound{prepaid: pre}); !strings.Contains(got, "rate_limited") {
		t.Errorf("call with a refused prepaid: %s, want it rate_limited", got)
	}
	if ops := opsSince(t, reg, before); ops != "" {
		t.Errorf("the call with its prepaid asked the store: %s, want nothing", ops)
	}
	if got := route(2, inbound{}); !strings.Contains(got, `"text":"ok"`) {
		t.Errorf("call with no prepaid: %s, want it run (the agent's one call of the minute)", got)
	}
}

const listTripsYAML = `
servers:
  fx: {command: fixture}
`

// TestListFromCopyRoundTrips: with a Redis store and no agent that offers
// tool_search (the default: no agents), a tools/list on a session whose
// copy is current on the replica costs no store round trip: no search
// can have activated a tool on another replica, so "nothing activated"
// needs no second read of the session.
func TestListFromCopyRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewRegistry()
	st := tripsStore(t, srv, reg)
	p := New(Options{Config: parseConfig(t, listTripsYAML), Upstreams: map[string]Upstream{"fx": connected(echoTool)},
		Logger: zerolog.Nop(), Version: "test", Store: st})
	p.Refresh()
	c := &httpClient{t: t, url: startHTTP(t, p).URL + "/mcp"}
	c.initialize()
	announced(t, p)
	list := func(id int) {
		t.Helper()
		r := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id))
		if r.status != http.StatusOK || !strings.Contains(r.body, `"name":"fx__echo"`) {
			t.Fatalf("tools/list %d: %d %s", id, r.status, r.body)
		}
	}
	list(1) // the session's first read after initialize's writes: the copy
	before := storeCounts(t, reg)
	const lists = 3
	for i := range lists {
		announced(t, p) // the copy is current: a ping was just answered
		list(i + 2)
	}
	if got := opsSince(t, reg, before); got != "" {
		t.Errorf("store operations of %d tools/list from the copy (the store's upkeep left out): %s, want none", lists, got)
	}
}
