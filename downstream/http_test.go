package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// httpReply is one HTTP response, body read.
type httpReply struct {
	status int
	header http.Header
	body   string
}

type httpClient struct {
	t       *testing.T
	url     string
	session string
}

func (c *httpClient) do(method, body string, header map[string]string) httpReply {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, c.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	return httpReply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (c *httpClient) post(body string) httpReply {
	c.t.Helper()
	return c.do(http.MethodPost, body, nil)
}

func (c *httpClient) initialize() {
	c.t.Helper()
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if r.status != http.StatusOK {
		c.t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	c.session = r.header.Get("Mcp-Session-Id")
	if !strings.HasPrefix(c.session, "mcp-proxy-") {
		c.t.Fatalf("initialize: session id %q", c.session)
	}
	if r := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %d %s", r.status, r.body)
	}
}

// checkJSON checks a JSON-mode reply: status 200, JSON content type, a
// Content-Length that matches the body, and the exact body.
func checkJSON(t *testing.T, r httpReply, want string) {
	t.Helper()
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, Content-Type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Errorf("Content-Length %s, body has %d bytes", cl, len(r.body))
	}
	if r.body != want+"\n" {
		t.Errorf("body =\n%s\nwant\n%s", r.body, want)
	}
}

func startHTTP(t *testing.T, p *Proxy) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(p.HTTPHandler(""))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPSession(t *testing.T) {
	fx := echoUpstream()
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.initialize()

	r := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	result, _, err := rawjson.Get([]byte(strings.TrimSpace(r.body)), "result")
	if err != nil {
		t.Fatalf("tools/list body %q: %v", r.body, err)
	}
	tools, _, _ := rawjson.Get(result, "tools")
	if want := `[` + exposedEcho + `]`; string(tools) != want {
		t.Errorf("tools =\n%s\nwant\n%s", tools, want)
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Errorf("tools/list Content-Length %s, body has %d bytes", cl, len(r.body))
	}

	r = c.post(`{"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hi"}}}`)
	checkJSON(t, r, `{"jsonrpc":"2.0","id":"c2","result":`+echoResult+`}`)
	if reqs := fx.requests(); len(reqs) != 1 || reqs[0].Params != `{"name":"echo","arguments":{"text":"hi"}}` {
		t.Errorf("upstream requests = %+v", reqs)
	}

	r = c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}`)
	checkJSON(t, r, `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool: nope"}}`)

	r = c.post(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if r.status != http.StatusOK || strings.TrimSpace(r.body) != `{"jsonrpc":"2.0","id":4,"result":{}}` {
		t.Errorf("ping: %d %s", r.status, r.body)
	}

	// DELETE ends the session; its id is then refused.
	if r := c.do(http.MethodDelete, "", nil); r.status != http.StatusOK {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
	if r := c.post(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Errorf("tools/list on a terminated session: %d %s, want 404", r.status, r.body)
	}
}

func TestHTTPUnknownSession(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp", session: "mcp-proxy-00000000000000000000000000000000"}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	} {
		if r := c.post(body); r.status != http.StatusNotFound {
			t.Errorf("%s with an unknown session: %d %s, want 404", body, r.status, r.body)
		}
	}
}

func TestHTTPBodyTooLarge(t *testing.T) {
	fx := echoUpstream()
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.initialize()
	prefix := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"`
	body := prefix + strings.Repeat("a", maxRequestBytes-len(prefix)+1) + `"}}}`
	r := c.post(body)
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d %.200s, want 413", r.status, r.body)
	}
	if !strings.Contains(r.body, "33554432-byte limit") {
		t.Errorf("413 body %q does not name the limit", r.body)
	}
	if len(fx.requests()) != 0 {
		t.Error("the oversized call reached the upstream")
	}
}

func TestHTTPHealth(t *testing.T) {
	fx := connected(echoTool)
	opt := &fakeUpstream{}
	opt.set(upstream.StateFailed)
	fx.set(upstream.StateConnecting)
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  fx: {command: fixture, required: true}
  opt: {command: fixture}
`, map[string]*fakeUpstream{"fx": fx, "opt": opt})
	srv := startHTTP(t, p)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "fx") || strings.Contains(body, "opt") {
		t.Errorf("/readyz with required fx connecting = %d %q, want 503 naming fx only", code, body)
	}
	fx.set(upstream.StateConnected, echoTool)
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with fx connected = %d %q, want 200", code, body)
	}
	fx.set(upstream.StateFailed)
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after fx failed = %d, want 503", code)
	}
}

// Progress sent while a call runs turns the POST's response into an SSE
// stream, ahead of the response, whose event still carries the upstream's
// bytes.
func TestHTTPStreamedCallResponse(t *testing.T) {
	fx := connected(echoTool)
	var p *Proxy
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		meta, _, _ := rawjson.Get(params, "_meta")
		tok, _, _ := rawjson.Get(meta, "progressToken")
		p.OnUpstreamNotification("fx", "notifications/progress", json.RawMessage(`{"progressToken":`+string(tok)+`,"progress":1,"total":2}`))
		return json.RawMessage(echoResult), nil
	}
	p = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.initialize()
	r := c.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{},"_meta":{"progressToken":"pt"}}}`)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var data []string
	for _, ev := range strings.Split(strings.TrimSuffix(r.body, "\n\n"), "\n\n") {
		for _, line := range strings.Split(ev, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, d)
			}
		}
	}
	want := `{"jsonrpc":"2.0","id":7,"result":` + echoResult + `}`
	wantProgress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"pt","progress":1,"total":2}}`
	if len(data) != 2 || data[0] != wantProgress || data[1] != want {
		t.Fatalf("events =\n%s\nwant the notification, then\n%s\nbody %q", strings.Join(data, "\n"), want, r.body)
	}
}

func TestHTTPUnknownAgentPath(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/agents/nobody/mcp"}
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r.status != http.StatusNotFound {
		t.Errorf("unknown agent: %d %s, want 404", r.status, r.body)
	}
}

// A session's id works only on the endpoint of the agent that created it,
// for POST, GET and DELETE alike; an id never issued is unknown too
// (docs/agents.md#over-http). Neither opens a stream nor counts as a session.
func TestHTTPSessionBoundToItsAgent(t *testing.T) {
	const yaml = `
startup_wait: 1s
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
bundles:
  all: {servers: [fx]}
agents:
  a: {mcp_bundles: [all]}
  b: {mcp_bundles: [all]}
`
	p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": echoUpstream()})
	srv := startHTTP(t, p)
	b := &httpClient{t: t, url: srv.URL + "/agents/b/mcp"}
	b.initialize()
	countSessions := func() int {
		n := 0
		p.sessions.each(func(*session) { n++ })
		return n
	}
	if n := countSessions(); n != 1 {
		t.Fatalf("%d sessions after one initialize", n)
	}
	a := &httpClient{t: t, url: srv.URL + "/agents/a/mcp", session: b.session}
	never := &httpClient{t: t, url: srv.URL + "/agents/b/mcp", session: "mcp-proxy-00000000000000000000000000000000"}
	for _, c := range []*httpClient{a, never} {
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			body := ""
			if method == http.MethodPost {
				body = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
			}
			if r := c.do(method, body, nil); r.status != http.StatusNotFound {
				t.Errorf("%s %s with session %s: %d %s, want 404", method, c.url, c.session, r.status, r.body)
			}
		}
	}
	if n := countSessions(); n != 1 {
		t.Errorf("%d sessions after refused requests, want 1", n)
	}
	if r := b.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.status != http.StatusOK {
		t.Errorf("the owner's session stopped working: %d %s", r.status, r.body)
	}
}

// An HTTP session nobody uses for listen.session_idle_timeout is closed,
// and its id is then unknown.
func TestHTTPIdleSessionClosed(t *testing.T) {
	p := newProxy(t, oneServerYAML+"listen: {session_idle_timeout: 300ms}\n", map[string]*fakeUpstream{"fx": echoUpstream()})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.initialize()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		p.sessions.each(func(*session) { n++ })
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.status != http.StatusNotFound {
		t.Errorf("ping on a closed idle session: %d %s, want 404", r.status, r.body)
	}
}

// sessionRequest sends one request of an HTTP session (a POST of body, or
// a GET when body is "") without failing the test, so that goroutines
// other than the test's can use it. The caller closes the body.
func sessionRequest(ctx context.Context, url, sid, body string) (*http.Response, error) {
	method := http.MethodPost
	if body == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	return http.DefaultClient.Do(req)
}

// A session the idle sweep has decided to close is closed for every
// request from then on: a POST or a GET arriving while the sweep is still
// ending the sessions it chose gets 404 like any unknown session, not an
// answer on a session about to close.
func TestHTTPIdleSweepDecidesOnce(t *testing.T) {
	p := newProxy(t, oneServerYAML+"listen: {session_idle_timeout: 1h}\n", map[string]*fakeUpstream{"fx": echoUpstream()})
	url := ""
	var ids []string
	type seen struct{ post, get int }
	during := make(chan seen, 1)
	var once sync.Once
	ended := p.sessions.onRemove
	p.sessions.onRemove = func(s *session) {
		once.Do(func() { // while the sweep ends its first session, a client uses the other
			other := ids[0]
			if other == s.id {
				other = ids[1]
			}
			var got seen
			if resp, err := sessionRequest(context.Background(), url, other, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); err == nil {
				got.post = resp.StatusCode
				resp.Body.Close()
			}
			ctx, cancel := context.WithCancel(context.Background())
			if resp, err := sessionRequest(ctx, url, other, ""); err == nil {
				got.get = resp.StatusCode
				resp.Body.Close()
			}
			cancel()
			during <- got
		})
		ended(s)
	}
	srv := startHTTP(t, p)
	url = srv.URL + "/mcp"
	for range 2 {
		c := &httpClient{t: t, url: url}
		c.initialize()
		ids = append(ids, c.session)
	}
	p.sessions.each(func(s *session) { s.activity.last.Store(time.Now().Add(-2 * time.Hour).UnixNano()) })
	if n := p.sessions.closeIdle(time.Hour); n != 2 {
		t.Fatalf("the sweep closed %d sessions, want both", n)
	}
	if got := <-during; got.post != http.StatusNotFound || got.get != http.StatusNotFound {
		t.Errorf("during the sweep, a session it closes answered POST %d and GET %d; want 404 and 404", got.post, got.get)
	}
}

// With a tiny session_idle_timeout the sweep and the clients' requests
// overlap all the time: every POST is answered on a live session or gets
// 404, and a GET stream that opened stays open until its client leaves
// (the sweep never closes a session a request has begun on).
func TestHTTPIdleSweepUnderLoad(t *testing.T) {
	p := newProxy(t, oneServerYAML+"listen: {session_idle_timeout: 1ms}\n", map[string]*fakeUpstream{"fx": echoUpstream()})
	url := startHTTP(t, p).URL + "/mcp"
	const clients = 8
	stop := time.Now().Add(1500 * time.Millisecond)
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(k string) {
		mu.Lock()
		counts[k]++
		mu.Unlock()
	}
	// initialize opens a session; "" after an error it reported.
	initialize := func() string {
		resp, err := sessionRequest(context.Background(), url, "",
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
		if err != nil {
			t.Errorf("initialize: %v", err)
			return ""
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Errorf("initialize: %d, session %q", resp.StatusCode, sid)
			return ""
		}
		return sid
	}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := ""
			for n := 0; time.Now().Before(stop); n++ {
				if sid == "" {
					if sid = initialize(); sid == "" {
						return
					}
				}
				if (n+i)%10 == 0 {
					ctx, cancel := context.WithCancel(context.Background())
					resp, err := sessionRequest(ctx, url, sid, "")
					if err != nil {
						cancel()
						t.Errorf("GET: %v", err)
						return
					}
					if resp.StatusCode == http.StatusOK {
						count("get open")
						ended := make(chan struct{})
						go func() { io.Copy(io.Discard, resp.Body); close(ended) }()
						select {
						case <-ended:
							t.Errorf("a GET stream of session %s ended by itself", sid)
						case <-time.After(250 * time.Millisecond): // more than two sweeps
						}
						cancel()
						<-ended
					} else {
						cancel()
						count(strconv.Itoa(resp.StatusCode))
						if resp.StatusCode != http.StatusNotFound {
							t.Errorf("GET: %d, want 200 or 404", resp.StatusCode)
						}
						sid = ""
					}
					resp.Body.Close()
					continue
				}
				resp, err := sessionRequest(context.Background(), url, sid, `{"jsonrpc":"2.0","id":`+strconv.Itoa(n)+`,"method":"ping"}`)
				if err != nil {
					t.Errorf("POST: %v", err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				count(strconv.Itoa(resp.StatusCode))
				switch resp.StatusCode {
				case http.StatusOK:
					if want := `{"jsonrpc":"2.0","id":` + strconv.Itoa(n) + `,"result":{}}` + "\n"; string(body) != want {
						t.Errorf("ping answered %q, want %q", body, want)
					}
				case http.StatusNotFound:
					if !strings.Contains(string(body), "Session not found") {
						t.Errorf("404 body %q", body)
					}
					sid = ""
				default:
					t.Errorf("ping: %d %s", resp.StatusCode, body)
				}
				time.Sleep(time.Duration(n%3) * time.Millisecond) // now and then idle past the timeout
			}
		}()
	}
	// The busy clients idle past the timeout only now and then, and keep a
	// GET open most of the time, so whether a sweep catches one of them is
	// up to the machine's load. One more client leaves its session idle
	// until the sweep has closed it, amid the others' requests, and must
	// then get 404.
	wg.Add(1)
	go func() {
		defer wg.Done()
		sid := initialize()
		if sid == "" {
			return
		}
		for live := true; live; {
			if time.Now().After(stop.Add(5 * time.Second)) {
				t.Errorf("session %s was not swept in %v", sid, time.Since(stop)+1500*time.Millisecond)
				return
			}
			time.Sleep(20 * time.Millisecond)
			live = false
			p.sessions.each(func(s *session) { live = live || s.id == sid })
		}
		resp, err := sessionRequest(context.Background(), url, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if err != nil {
			t.Errorf("POST: %v", err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "Session not found") {
			t.Errorf("a swept session answered %d %q, want 404 Session not found", resp.StatusCode, body)
		}
		count("swept 404")
	}()
	wg.Wait()
	t.Logf("responses: %v", counts)
	if counts["200"] == 0 || counts["swept 404"] != 1 {
		t.Errorf("responses %v: the test needs answered requests and the swept session's 404", counts)
	}
}

// A stateless 2026-07-28 response's HTTP status follows its JSON-RPC error
// code, whether the handler gave it or the request was refused before one
// ran: none or one the transport does not name is 200, method not found
// 404, the request's own faults 400.
func TestStatelessStatusFollowsErrorCode(t *testing.T) {
	fx := connected(`{"name":"echo","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return nil, &upstream.RPCError{Code: -32000, Message: "upstream failed"}
	}
	srv := startHTTP(t, newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx}))
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	for _, tt := range []struct {
		method, params string
		status         int
		code           string
	}{
		{"tools/list", `{"_meta":{` + modernMeta + `}}`, http.StatusOK, ""},
		{"tools/call", `{"name":"fx__echo","arguments":{},"_meta":{` + modernMeta + `}}`, http.StatusOK, `"code":-32000`},
		{"tools/call", `{"name":"fx__nope","arguments":{},"_meta":{` + modernMeta + `}}`, http.StatusBadRequest, `"code":-32602`},
		{"nope/nope", `{"_meta":{` + modernMeta + `}}`, http.StatusNotFound, `"code":-32601`},
		{"tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, http.StatusBadRequest, `"code":-32602`},
		{"tools/list", `{"_meta":{` + modernMeta + `},"_meta":{}}`, http.StatusBadRequest, `"code":-32600`},
	} {
		r := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"`+tt.method+`","params":`+tt.params+`}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": tt.method, "Mcp-Name": targetOf(tt.params)})
		if r.status != tt.status || tt.code != "" && !strings.Contains(r.body, tt.code) || tt.code == "" && strings.Contains(r.body, `"error"`) {
			t.Errorf("%s %s: %d %s\nwant %d with %q", tt.method, tt.params, r.status, r.body, tt.status, tt.code)
		}
	}
}

// A GET stream whose handler has returned writes nothing more: a broadcast
// that picked the stream before it was detached gets errStreamGone instead
// of writing to a finished ResponseWriter (a data race in net/http).
func TestGetStreamClosedWritesNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	gs := &getStream{w: rec, rc: http.NewResponseController(rec)}
	gs.open()
	if err := gs.send([]byte(`{"jsonrpc":"2.0","method":"a"}`)); err != nil {
		t.Fatalf("send on an open stream: %v", err)
	}
	before := rec.Body.Len()
	gs.close()
	if err := gs.send([]byte(`{"jsonrpc":"2.0","method":"b"}`)); !errors.Is(err, errStreamGone) {
		t.Errorf("send after close = %v, want %v", err, errStreamGone)
	}
	if err := gs.comment("keepalive"); !errors.Is(err, errStreamGone) {
		t.Errorf("comment after close = %v, want %v", err, errStreamGone)
	}
	if rec.Body.Len() != before {
		t.Errorf("the closed stream wrote %q", rec.Body.String()[before:])
	}
}
