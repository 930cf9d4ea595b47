//go:build redis

package downstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// sharedReplicas starts n proxies over deferredYAML sharing Redis srv, and
// returns them with their MCP endpoint URLs.
func sharedReplicas(t *testing.T, srv *redistest.Server, n int) ([]*Proxy, []string) {
	t.Helper()
	var ps []*Proxy
	var urls []string
	for range n {
		up := connected(`{"name":"read_file","description":"Read the complete contents of a file.","inputSchema":{"type":"object"}}`,
			`{"name":"list_directory","description":"List the entries of a directory.","inputSchema":{"type":"object"}}`)
		up.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
		}
		p := New(Options{Config: parseConfig(t, deferredYAML), Upstreams: map[string]Upstream{"fs": up}, Logger: zerolog.Nop(),
			Version: "test", Store: redisStore(t, srv)})
		p.Refresh()
		ps = append(ps, p)
		urls = append(urls, startHTTP(t, p).URL+"/mcp")
	}
	return ps, urls
}

// supervisedReplicas starts n proxies of supervisedYAML on srv, whose tool
// fx__echo answers "ran" once approved, and returns them with their URLs.
func supervisedReplicas(t *testing.T, srv *redistest.Server, n int) ([]*Proxy, []string) {
	t.Helper()
	var ps []*Proxy
	var urls []string
	for range n {
		fx := connected(echoTool)
		fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`), nil
		}
		p := New(Options{Config: parseConfig(t, supervisedYAML), Upstreams: map[string]Upstream{"fx": fx}, Logger: zerolog.Nop(),
			Version: "test", Store: redisStore(t, srv)})
		p.Refresh()
		ps = append(ps, p)
		urls = append(urls, startHTTP(t, p).URL+"/mcp")
	}
	return ps, urls
}

// announced waits until the copy of the sessions of each of ps holds
// every session write announced so far: a write made on one replica
// reaches another's copy after the announcement's delay
// (docs/shared-state.md#the-replicas-copy-of-sessions).
func announced(t *testing.T, ps ...*Proxy) {
	t.Helper()
	for _, p := range ps {
		if err := p.sessions.shared.store.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// listNames is the names of a tools/list reply.
func listNames(t *testing.T, r httpReply) string {
	t.Helper()
	result, _, err := rawjson.Get([]byte(strings.TrimSpace(r.body)), "result")
	if err != nil || r.status != http.StatusOK {
		t.Fatalf("tools/list: %d %s", r.status, r.body)
	}
	return strings.Join(listedNames(t, result), ",")
}

// TestSessionAcrossReplicas: a session made on one replica goes on through
// the others with no new initialize: the initialized notification,
// tools/list, a tool_search's activation seen by the next replica, a call,
// the log level and an "always" approval; DELETE on one ends it on all.
// Redis holds the session under the HMAC of its id, never the id.
func TestSessionAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ps, urls := sharedReplicas(t, srv, 3)
	c := &httpClient{t: t, url: urls[0]}
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"test","version":"1"}}}`)
	c.session = r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || c.session == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	at := func(i int) *httpClient { return &httpClient{t: t, url: urls[i], session: c.session} }
	if r := at(1).post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized on replica 2: %d %s", r.status, r.body)
	}
	if got := listNames(t, at(2).post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)); got != "tool_search,call_tool,fs__list_directory" {
		t.Errorf("tools/list on replica 3 = %s", got)
	}
	r = at(0).post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tool_search","arguments":{"query":"select:fs__read_file"}}}`)
	if !strings.Contains(r.body, "fs__read_file") {
		t.Fatalf("tool_search on replica 1: %s", r.body)
	}
	if got := listNames(t, at(1).post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)); got != "tool_search,call_tool,fs__read_file,fs__list_directory" {
		t.Errorf("tools/list on replica 2 after the search on replica 1 = %s", got)
	}
	if r := at(2).post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fs__read_file","arguments":{}}}`); !strings.Contains(r.body, `"text":"done"`) {
		t.Errorf("call on replica 3: %d %s", r.status, r.body)
	}
	if r := at(0).post(`{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"warning"}}`); r.status != http.StatusOK {
		t.Fatalf("logging/setLevel on replica 1: %d %s", r.status, r.body)
	}
	ps[0].sessions.byID[c.session].state.ApproveAlways("fs__read_file")
	announced(t, ps[1]) // the level, which is read late (the approval is not)
	if r := at(1).post(`{"jsonrpc":"2.0","id":6,"method":"ping"}`); r.status != http.StatusOK {
		t.Fatalf("ping on replica 2: %d %s", r.status, r.body)
	}
	s := ps[1].sessions.byID[c.session]
	if s == nil || s.state.Level() != levelIndex("warning") || !s.state.ApprovedAlways("fs__read_file") || s.version() != "2025-11-25" {
		t.Fatalf("replica 2's session: %+v", s)
	}
	select {
	case <-s.initialized:
	default:
		t.Error("replica 2 does not know the client sent notifications/initialized")
	}

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	keys, err := rdb.Keys(t.Context(), "mcp-proxy:session:*").Result()
	if err != nil || len(keys) != 1 || strings.Contains(keys[0], c.session) {
		t.Fatalf("session keys = %q, %v; want one, not naming the id", keys, err)
	}
	fields, _ := rdb.HGetAll(t.Context(), keys[0]).Result()
	for k, v := range fields {
		if strings.Contains(k+v, c.session) {
			t.Errorf("the stored session holds its id in %s", k)
		}
	}
	if ttl, _ := rdb.PTTL(t.Context(), keys[0]).Result(); ttl <= 0 {
		t.Errorf("the session key has no expiry (%v)", ttl)
	}
	// The cost the docs promise: a session with its state in at most 2 KB.
	if n, err := rdb.MemoryUsage(t.Context(), keys[0]).Result(); err != nil || n > 2048 {
		t.Errorf("MEMORY USAGE of the session = %d bytes (%v), want at most 2048", n, err)
	} else {
		t.Logf("MEMORY USAGE of the session: %d bytes", n)
	}

	if r := at(1).do(http.MethodDelete, "", nil); r.status != http.StatusOK {
		t.Fatalf("DELETE on replica 2: %d %s", r.status, r.body)
	}
	announced(t, ps...)
	for i := range urls {
		if r := at(i).post(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); r.status != http.StatusNotFound {
			t.Errorf("tools/list on replica %d after DELETE: %d %s, want 404", i+1, r.status, r.body)
		}
	}
}

// TestSessionStoreDown: with Redis down a session's request fails with
// 503 and a JSON-RPC error naming the store; once Redis is back (its
// append-only file replayed) the same session goes on.
func TestSessionStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	_, urls := sharedReplicas(t, srv, 2)
	c := &httpClient{t: t, url: urls[0]}
	c.initialize()
	srv.Kill()
	r := (&httpClient{t: t, url: urls[1], session: c.session}).post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"message":"shared-state store (Redis) unavailable at `+srv.Addr) {
		t.Fatalf("tools/list with Redis down: %d %s", r.status, r.body)
	}
	srv.Start()
	r = (&httpClient{t: t, url: urls[1], session: c.session}).post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := listNames(t, r); got != "tool_search,call_tool,fs__list_directory" {
		t.Errorf("tools/list once Redis is back = %s", got)
	}
}

// TestStaleCopyNoIsReadAgain: a replica serving a session from its copy
// answers no NO that a write made elsewhere, not yet announced to it,
// would turn into a YES: it reads the session again first. Each write
// here is made in Redis with no announcement, as a write on another
// replica whose announcement has not arrived yet. The copy is in use (a
// log level so written is not seen: levels may be read late), yet a tool
// activated is listed, a client's notifications/initialized is known, and
// a tool approved "always" runs with no question.
func TestStaleCopyNoIsReadAgain(t *testing.T) {
	srv := redistest.Start(t)
	ps, urls := sharedReplicas(t, srv, 2)
	c := &httpClient{t: t, url: urls[0]}
	c.initialize()
	announced(t, ps...)
	b := &httpClient{t: t, url: urls[1], session: c.session}
	if got := listNames(t, b.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)); got != "tool_search,call_tool,fs__list_directory" {
		t.Fatalf("tools/list on replica 2 = %s", got)
	}
	st := redisStore(t, srv)
	key := st.Redis().Key("session", st.Keys().SessionID(c.session))
	unannounced := func(field string) {
		t.Helper()
		if err := st.Redis().Client().HSet(t.Context(), key, field, "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	unannounced(fieldLevel) // "1": alert
	if r := b.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.status != http.StatusOK {
		t.Fatalf("ping on replica 2: %d %s", r.status, r.body)
	}
	if l := ps[1].sessions.byID[c.session].state.Level(); l != -1 {
		t.Fatalf("replica 2 read the level %d; want none: the session comes from its copy", l)
	}
	unannounced(prefixActivated + "fs__read_file")
	if got := listNames(t, b.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)); got != "tool_search,call_tool,fs__read_file,fs__list_directory" {
		t.Errorf("tools/list on replica 2 after an activation it was not told of = %s", got)
	}

	// A client whose notifications/initialized reached another replica:
	// replica 2's questions to it need not wait for one.
	c = &httpClient{t: t, url: urls[0]}
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	c.session = r.header.Get("Mcp-Session-Id")
	announced(t, ps...)
	b = &httpClient{t: t, url: urls[1], session: c.session}
	for i := range 2 { // the first read fills the copy, the second is from it
		if r := b.post(`{"jsonrpc":"2.0","id":5,"method":"ping"}`); r.status != http.StatusOK {
			t.Fatalf("ping %d on replica 2: %d %s", i+1, r.status, r.body)
		}
	}
	key = st.Redis().Key("session", st.Keys().SessionID(c.session))
	unannounced(fieldInitialized)
	if r := b.post(`{"jsonrpc":"2.0","id":6,"method":"ping"}`); r.status != http.StatusOK {
		t.Fatalf("ping on replica 2: %d %s", r.status, r.body)
	}
	select {
	case <-ps[1].sessions.byID[c.session].initialized:
	default:
		t.Error("replica 2 does not know of a notifications/initialized it was not told of")
	}

	sup, urlsSup := supervisedReplicas(t, srv, 2)
	ps = append(ps, sup...)
	c = &httpClient{t: t, url: urlsSup[0]}
	c.initialize() // no elicitation: a tool that needs approval cannot run
	announced(t, ps...)
	b = &httpClient{t: t, url: urlsSup[1], session: c.session}
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`
	if r := b.post(call); !strings.Contains(r.body, "needs approval") {
		t.Fatalf("call on replica 2 before the approval: %d %s", r.status, r.body)
	}
	key = st.Redis().Key("session", st.Keys().SessionID(c.session))
	unannounced(prefixAlways + "fx__echo")
	if r := b.post(call); !strings.Contains(r.body, `"text":"ran"`) {
		t.Errorf("call on replica 2 after an \"always\" approval it was not told of: %d %s", r.status, r.body)
	}
}

// TestStaleCopyNoStoreError: when the second read of a session that a NO
// from the replica's copy needs (sharedState.reread) fails, the request
// fails with the store's error, as it did when every request read the
// session: the copy may lack a write made elsewhere, so the NO is not
// answered. Redis here keeps answering pings and the subscription (the
// copy stays current) but refuses HGETALL, the session's read.
func TestStaleCopyNoStoreError(t *testing.T) {
	srv := redistest.Start(t)
	ps, urls := sharedReplicas(t, srv, 2)
	sup, supURLs := supervisedReplicas(t, srv, 2)
	ps, urls = append(ps, sup...), append(urls, supURLs...)
	deferred := &httpClient{t: t, url: urls[0]}
	deferred.initialize()
	supervised := &httpClient{t: t, url: urls[2]}
	supervised.initialize() // no elicitation: a tool that needs approval cannot run
	announced(t, ps...)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`
	b := &httpClient{t: t, url: urls[1], session: deferred.session}
	if got := listNames(t, b.post(list)); got != "tool_search,call_tool,fs__list_directory" {
		t.Fatalf("tools/list on replica 2 = %s", got)
	}
	d := &httpClient{t: t, url: urls[3], session: supervised.session}
	if r := d.post(call); !strings.Contains(r.body, "needs approval") {
		t.Fatalf("call on replica 4: %d %s", r.status, r.body)
	}
	admin := redisStore(t, srv).Redis().Client()
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "default", "-hgetall").Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		replica *Proxy
		cl      *httpClient
		msg     string
	}{
		{"tools/list, nothing activated", ps[1], b, list},
		{"tools/call, no \"always\" approval", ps[3], d, call},
	} {
		announced(t, c.replica) // the copy is current: a ping was just answered
		r := c.cl.post(c.msg)
		if !strings.Contains(r.body, `"error"`) || !strings.Contains(r.body, "store session_load") || !strings.Contains(r.body, "NOPERM") {
			t.Errorf("%s with the session's read refused: %d %s, want the store's error", c.name, r.status, r.body)
		}
	}
}

// TestStaleCopyConcurrentReread: two requests of a session on one replica
// both read its state from the copy, which lacks a tool activated on
// another replica and not announced yet. While the first reads the
// session again for its NO, the second, asking the same question, does
// not answer NO from the copy: it reads the session too.
func TestStaleCopyConcurrentReread(t *testing.T) {
	srv := redistest.Start(t)
	st := redisStore(t, srv)
	ss := st.Sessions(time.Hour)
	if err := ss.Create(t.Context(), "sid-1", map[string]string{fieldAgent: "dev"}); err != nil {
		t.Fatal(err)
	}
	stale, err := ss.Reload(t.Context(), "sid-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Set(t.Context(), "sid-1", prefixActivated+"fs__read_file", "1"); err != nil {
		t.Fatal(err)
	}
	sh := newSharedState("sid-1", ss, zerolog.Nop())
	stale.Copy = true
	sh.load(stale) // both requests' reads, from the copy
	first, release := make(chan struct{}), make(chan struct{})
	var rereads atomic.Int32
	sh.mu.Lock()
	sh.beforeReread = func() {
		if rereads.Add(1) == 1 {
			close(first)
			<-release
		}
	}
	sh.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- sh.reread(context.Background()) }() // the first request
	<-first
	if sh.Activated("fs__read_file") {
		t.Fatal("the copy already has the activation")
	}
	if err := sh.reread(t.Context()); err != nil { // the second request
		t.Fatal(err)
	}
	if !sh.Activated("fs__read_file") {
		t.Error("the second request answers NO from the copy while the first one reads the session again")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
