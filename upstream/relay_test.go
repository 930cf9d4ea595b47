package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// The requests an upstream sends the proxy reach Options.OnRequest as the
// bytes the server wrote, and the client's result goes back as its bytes,
// on every transport: a re-encoding would re-sort keys, round integers
// beyond 2^53, escape '<' and collapse a member named twice.

// auditRequest is the server request of the audit (issue 14): key order,
// an integer beyond 2^53 and '<' must all survive.
const auditRequest = `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"z":1,"maxTokens":100,"x-extra":18446744073709551615,"t":"<b>"}}`

// relayedResult is what the test's client answers: spacing, key order, '<'
// and an integer beyond 2^53 the upstream must get as they are.
const relayedResult = `{"role":"assistant", "content":{"type":"text","text":"<b>&amp;</b>"},"model":"m","n":18446744073709551615}`

// relayedCall is one OnRequest call.
type relayedCall struct {
	value  any // the context's value of relayRecorder.key
	method string
	params string
}

// callKey is the key of a value the caller's context carries.
type callKey struct{}

// relayRecorder is an Options.OnRequest that records its calls and answers
// relayedResult, or, for params naming "pretty", relayedResult spread over
// lines (a client that pretty-prints), or, for "refuse", an RPCError.
type relayRecorder struct {
	mu    sync.Mutex
	calls []relayedCall
}

func (r *relayRecorder) onRequest(ctx context.Context, server, method string, params json.RawMessage) (json.RawMessage, error) {
	r.mu.Lock()
	r.calls = append(r.calls, relayedCall{value: ctx.Value(callKey{}), method: method, params: string(params)})
	r.mu.Unlock()
	switch {
	case strings.Contains(string(params), `"refuse"`):
		return nil, &RPCError{Code: -1, Message: "user <rejected>", Data: json.RawMessage(`{"n":18446744073709551615}`)}
	case strings.Contains(string(params), `"pretty"`):
		return json.RawMessage(strings.ReplaceAll(relayedResult, ",", ",\n  ")), nil
	}
	return json.RawMessage(relayedResult), nil
}

func (r *relayRecorder) take() []relayedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// relayCase is a request of the server and what must come of it.
type relayCase struct {
	name string
	// data is the message the server sends; over SSE every line is one
	// "data:" line of the event.
	data string
	// params is what OnRequest must get.
	params string
	// local: the proxy answers itself, OnRequest must not be called.
	local bool
	// reply is the reply the server must get.
	reply string
}

var relayCases = []relayCase{
	{name: "audit", data: auditRequest,
		params: `{"z":1,"maxTokens":100,"x-extra":18446744073709551615,"t":"<b>"}`,
		reply:  `{"jsonrpc":"2.0","id":1,"result":` + relayedResult + `}`},
	{name: "string id and spacing", data: `{"jsonrpc":"2.0","id":"s-\u00e9","method":"elicitation/create","params":{ "message" : "Name?\u003c", "requestedSchema":{"type":"object","properties":{}} }}`,
		params: `{ "message" : "Name?\u003c", "requestedSchema":{"type":"object","properties":{}} }`,
		reply:  `{"jsonrpc":"2.0","id":"s-\u00e9","result":` + relayedResult + `}`},
	{name: "big id, no params", data: `{"jsonrpc":"2.0","method":"roots/list","id":18446744073709551616}`,
		params: ``,
		reply:  `{"jsonrpc":"2.0","id":18446744073709551616,"result":` + relayedResult + `}`},
	{name: "error with data", data: `{"jsonrpc":"2.0","id":2,"method":"sampling/createMessage","params":{"refuse":true}}`,
		params: `{"refuse":true}`,
		reply:  `{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"user <rejected>","data":{"n":18446744073709551615}}}`},
	{name: "ping", local: true, data: `{"jsonrpc":"2.0","id":"p","method":"ping"}`,
		reply: `{"jsonrpc":"2.0","id":"p","result":{}}`},
	{name: "unknown method", local: true, data: `{"jsonrpc":"2.0","id":3,"method":"x/y","params":{}}`,
		reply: `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"method not found: x/y"}}`},
	{name: "duplicate in params", local: true, data: `{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{"maxTokens":1,"maxTokens":99999}}`,
		reply: `{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"invalid request: a member name appears twice in params"}}`},
	{name: "duplicate in _meta", local: true, data: `{"jsonrpc":"2.0","id":5,"method":"roots/list","params":{"_meta":{"a":1,"a":2}}}`,
		reply: `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"invalid request: a member name appears twice in params._meta"}}`},
	{name: "duplicate params", local: true, data: `{"jsonrpc":"2.0","id":6,"method":"roots/list","params":{},"params":{"x":1}}`,
		reply: `{"jsonrpc":"2.0","id":6,"error":{"code":-32600,"message":"invalid request: a member name appears twice"}}`},
	{name: "duplicate id", local: true, data: `{"jsonrpc":"2.0","id":7,"id":8,"method":"roots/list"}`,
		reply: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: a member name appears twice"}}`},
	{name: "null id", local: true, data: `{"jsonrpc":"2.0","id":null,"method":"roots/list"}`,
		reply: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the id must be a string or a number, not null"}}`},
	{name: "params not an object", local: true, data: `{"jsonrpc":"2.0","id":9,"method":"roots/list","params":"x"}`,
		reply: `{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"invalid request: params must be an object or an array"}}`},
}

// streamCases are relayCases only a stream can carry: a message spread
// over several data lines, whose line breaks OnRequest does not get (its
// client may be on a line-framed stream).
var streamCases = []relayCase{
	{name: "data lines", data: "{\"jsonrpc\":\"2.0\",\"id\":10,\n\"method\":\"sampling/createMessage\",\"params\":{\"a\":1,\n \"b\": \"<\"}}",
		params: `{"a":1, "b": "<"}`,
		reply:  `{"jsonrpc":"2.0","id":10,"result":` + relayedResult + `}`},
	{name: "pretty result", data: `{"jsonrpc":"2.0","id":11,"method":"sampling/createMessage","params":{"pretty":1}}`,
		params: `{"pretty":1}`,
		reply:  `{"jsonrpc":"2.0","id":11,"result":` + strings.ReplaceAll(relayedResult, ",", ",\n  ") + `}`},
}

// stdioCases: over stdio a reply goes out as one line.
var stdioCases = []relayCase{
	{name: "pretty result", data: `{"jsonrpc":"2.0","id":11,"method":"sampling/createMessage","params":{"pretty":1}}`,
		params: `{"pretty":1}`,
		reply:  `{"jsonrpc":"2.0","id":11,"result":` + strings.ReplaceAll(relayedResult, ",", ",  ") + `}`},
}

// askFunc has the server send data and returns the reply it got.
type askFunc func(t *testing.T, data string) string

// checkRelay runs cases through ask. With callValue set, OnRequest must
// have run with the context of the call (it carries callValue at callKey).
func checkRelay(t *testing.T, rec *relayRecorder, ask askFunc, cases []relayCase, callValue any) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ask(t, tc.data); got != tc.reply {
				t.Errorf("the server got\n%s\nwant\n%s", got, tc.reply)
			}
			calls := rec.take()
			switch {
			case tc.local:
				if len(calls) != 0 {
					t.Errorf("OnRequest was called: %+v", calls)
				}
			case len(calls) != 1:
				t.Errorf("OnRequest called %d times, want once", len(calls))
			case calls[0].params != tc.params:
				t.Errorf("OnRequest got params\n%s\nwant\n%s", calls[0].params, tc.params)
			case calls[0].value != callValue:
				t.Errorf("OnRequest's context carries %v, want %v", calls[0].value, callValue)
			}
		})
	}
}

// TestServerRequestParamsBytesStdio is the audit's case over stdio, and the
// rest of relayCases: the fake writes the line, the proxy answers on its
// stdin.
func TestServerRequestParamsBytesStdio(t *testing.T) {
	t.Parallel()
	rec := &relayRecorder{}
	c := start(t, fakeServer(t, "fx"), Options{OnRequest: rec.onRequest})
	mustConnected(t, c)
	ask := func(t *testing.T, data string) string {
		return string(callTool(t, c, "ask", map[string]string{"line": data})["reply"])
	}
	checkRelay(t, rec, ask, relayCases, nil)
	checkRelay(t, rec, ask, stdioCases, nil)
}

// askServer is an MCP server written against the wire, over Streamable
// HTTP (legacy false) or the legacy HTTP+SSE transport: its tool "ask"
// sends the data given as one event of its stream (the call's POST stream,
// or the SSE stream), each line a "data:" line, waits for the POST that
// answers it and returns that POST's body as structuredContent.reply.
type askServer struct {
	legacy  bool
	replies chan string // bodies of the POSTs that carry a reply
	headers chan http.Header

	mu     sync.Mutex
	stream chan string // legacy: the events of the open SSE stream
}

// askEvent is the SSE event of a message sent as data, each line of it one
// data line.
func askEvent(data string) string {
	return "event: message\nid: 7\ndata: " + strings.ReplaceAll(data, "\n", "\ndata: ") + "\n\n"
}

func (a *askServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.legacy && r.Method == http.MethodGet {
		a.serveStream(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				Line string `json:"line"`
			} `json:"arguments"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	if m.Method == "" || m.ID == nil { // a reply, or a notification
		if m.Method == "" {
			h := r.Header.Clone()
			h.Set("X-Test-Request-Uri", r.URL.RequestURI())
			select {
			case a.headers <- h:
			default: // a test that does not look
			}
			a.replies <- string(body)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result string
	switch m.Method {
	case "initialize":
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"ask","version":"1"}}`
	case "tools/list":
		result = `{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`
	case "tools/call":
		if a.legacy {
			w.WriteHeader(http.StatusAccepted)
			go func() {
				a.send(askEvent(m.Params.Arguments.Line))
				a.send(askEvent(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + a.answer() + `}`))
			}()
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, askEvent(m.Params.Arguments.Line))
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, askEvent(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+a.answer()+`}`))
		return
	default:
		result = `{}`
	}
	msg := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
	if a.legacy {
		w.WriteHeader(http.StatusAccepted)
		a.send(askEvent(msg))
		return
	}
	if m.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", "ask-session")
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, msg)
}

// answer waits for the reply POST and returns the tool result carrying it.
func (a *askServer) answer() string {
	reply := "null"
	select {
	case reply = <-a.replies:
	case <-time.After(10 * time.Second):
	}
	return `{"content":[],"structuredContent":{"reply":` + reply + `}}`
}

// serveStream is the legacy SSE stream: the endpoint, then every event sent.
func (a *askServer) serveStream(w http.ResponseWriter, r *http.Request) {
	ch := make(chan string, 16)
	a.mu.Lock()
	a.stream = ch
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "event: endpoint\ndata: /message?session=1\n\n")
	w.(http.Flusher).Flush()
	for {
		select {
		case ev := <-ch:
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (a *askServer) send(ev string) {
	a.mu.Lock()
	ch := a.stream
	a.mu.Unlock()
	ch <- ev
}

func askServerConn(t *testing.T, legacy bool, rec *relayRecorder) (*Conn, *askServer) {
	t.Helper()
	a := &askServer{legacy: legacy, replies: make(chan string, 4), headers: make(chan http.Header, 4)}
	ts := httptest.NewServer(a)
	t.Cleanup(ts.Close)
	cfg := httpServer("ask", ts.URL+"/mcp")
	if legacy {
		cfg = httpServer("ask", ts.URL+"/sse")
		cfg.Transport = config.TransportSSE
	}
	c := start(t, cfg, Options{OnRequest: rec.onRequest})
	mustConnected(t, c)
	return c, a
}

// TestServerRequestParamsBytesHTTP: over Streamable HTTP the request comes
// on the call's POST stream; OnRequest gets the call's context, and the
// reply is POSTed with the session's id and protocol version.
func TestServerRequestParamsBytesHTTP(t *testing.T) {
	t.Parallel()
	rec := &relayRecorder{}
	c, a := askServerConn(t, false, rec)
	ask := func(t *testing.T, data string) string {
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callKey{}, "the call"), 10*time.Second)
		defer cancel()
		params, _ := json.Marshal(map[string]any{"name": "ask", "arguments": map[string]string{"line": data}})
		raw, err := c.Request(ctx, "tools/call", params)
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		select {
		case h := <-a.headers:
			if h.Get("Mcp-Session-Id") != "ask-session" || h.Get("Mcp-Protocol-Version") != "2025-11-25" {
				t.Errorf("the reply went with session %q, version %q", h.Get("Mcp-Session-Id"), h.Get("Mcp-Protocol-Version"))
			}
		case <-time.After(5 * time.Second):
			t.Errorf("no reply was posted")
		}
		var res struct {
			Structured struct{ Reply json.RawMessage } `json:"structuredContent"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("result %s: %v", raw, err)
		}
		return string(res.Structured.Reply)
	}
	checkRelay(t, rec, ask, relayCases, "the call")
	checkRelay(t, rec, ask, streamCases, "the call")
}

// TestServerRequestParamsBytesSSE: a legacy SSE server's requests come on
// its one stream (mcp-go's SSE client could not take them at all); the
// reply is POSTed to the endpoint it advertised.
func TestServerRequestParamsBytesSSE(t *testing.T) {
	t.Parallel()
	rec := &relayRecorder{}
	c, a := askServerConn(t, true, rec)
	ask := func(t *testing.T, data string) string {
		reply := string(callTool(t, c, "ask", map[string]string{"line": data})["reply"])
		select {
		case h := <-a.headers:
			if uri := h.Get("X-Test-Request-Uri"); uri != "/message?session=1" {
				t.Errorf("the reply went to %s, not to the advertised endpoint", uri)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("no reply was posted")
		}
		return reply
	}
	checkRelay(t, rec, ask, relayCases, nil)
	checkRelay(t, rec, ask, streamCases, nil)
}

// TestServerRequestsBounded: an http or sse server's requests are answered
// at most maxServerRequests at once; one more is refused at once, while
// they run, and answered again once they ended.
func TestServerRequestsBounded(t *testing.T) {
	t.Parallel()
	replies := make(chan string, maxServerRequests+2)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		replies <- string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(ts.Close)
	release := make(chan struct{})
	started := make(chan struct{}, maxServerRequests)
	c := New(httpServer("bound", ts.URL), Options{OnRequest: func(ctx context.Context, _, _ string, _ json.RawMessage) (json.RawMessage, error) {
		started <- struct{}{}
		<-release
		return json.RawMessage(`{}`), nil
	}})
	s := newSession(c, context.Background())
	t.Cleanup(s.close)
	w := &httpWire{url: ts.URL, client: ts.Client(), in: s.newInbox()}
	take := func(data []byte) bool {
		return !w.in.take(context.Background(), data, func(reply []byte) { w.in.reply(context.Background(), w.client, w.url, replyTo{}, reply) }).response
	}
	req := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"elicitation/create","params":{}}`, i))
	}
	for i := range maxServerRequests {
		if !take(req(i)) {
			t.Fatal("a request was not taken")
		}
	}
	for range maxServerRequests {
		<-started
	}
	t0 := time.Now()
	take(req(1000))
	want := `{"jsonrpc":"2.0","id":1000,"error":{"code":-32603,"message":"` + tooManyServerRequests + `"}}`
	if got := <-replies; got != want {
		t.Errorf("the request over the bound got %s, want %s", got, want)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	close(release)
	for range maxServerRequests {
		if got := <-replies; !strings.Contains(got, `"result":{}`) {
			t.Errorf("a request within the bound got %s", got)
		}
	}
	take(req(2000))
	<-started
	if got := <-replies; got != `{"jsonrpc":"2.0","id":2000,"result":{}}` {
		t.Errorf("after the others ended: %s", got)
	}
}

// TestReadServerRequest: what is not a request to the proxy is left to the
// transport; an invalid request is refused, an invalid notification
// dropped.
func TestReadServerRequest(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, "other"},
		{`{"jsonrpc":"2.0","method":"notifications/x","params":{"a":1,"a":2}}`, "other"},
		{`{"jsonrpc":"2.0","id":1,"result":{},"result":{"x":1}}`, "other"},
		{`{"jsonrpc":"2.0","id":1}`, "other"},
		{`not json`, "other"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "other"},
		{`{"jsonrpc":"2.0","method":"notifications/x","method":"y"}`, "drop"},
		{`{"jsonrpc":"1.0","method":"notifications/x"}`, "drop"},
		{`{"jsonrpc":"1.0","id":"a","method":"ping"}`, `{"jsonrpc":"2.0","id":"a","error":{"code":-32600,"message":"invalid request: \"jsonrpc\" must be \"2.0\""}}`},
		{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the id must be a string, a number or null"}}`},
		{`{"jsonrpc":"2.0","id":"px-1","method":"ping","result":{}}`, `{"jsonrpc":"2.0","id":"px-1","error":{"code":-32600,"message":"invalid request: a request cannot carry a result or an error"}}`},
		{`{"jsonrpc":"2.0","id":[1],"id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: a member name appears twice"}}`},
		{`{"jsonrpc":"2.0","id":-2,"method":"ping","method":"ping"}`, `{"jsonrpc":"2.0","id":-2,"error":{"code":-32600,"message":"invalid request: a member name appears twice"}}`},
		{` {"jsonrpc":"2.0","id":2,"method":"ping","params":[1,2]} `, `request "ping" id 2 params [1,2]`},
	} {
		in := readServerRequest([]byte(tc.in))
		got := "other"
		switch {
		case in.req != nil:
			got = fmt.Sprintf("request %q id %s params %s", in.req.method, in.req.id, in.req.params)
		case in.refusal != nil:
			got = string(in.refusal)
		case in.drop != "":
			got = "drop"
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// FuzzReadServerRequest: a request is taken with the very bytes of its id
// and params, as any JSON decoder reads them; a refusal is a valid
// JSON-RPC error response; nothing panics.
func FuzzReadServerRequest(f *testing.F) {
	for _, c := range relayCases {
		f.Add([]byte(c.data))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"a":1,"a":2}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"\u0061","method":"p\u0069ng"}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		in := readServerRequest(msg)
		if in.req != nil {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(msg, &m); err != nil {
				t.Fatalf("taken as a request, but not JSON to encoding/json: %v", err)
			}
			var method string
			if json.Unmarshal(m["method"], &method) != nil || method != in.req.method {
				t.Fatalf("method %q, encoding/json reads %s", in.req.method, m["method"])
			}
			if string(m["id"]) != string(in.req.id) || string(m["params"]) != string(in.req.params) {
				t.Fatalf("id %s params %s; encoding/json reads id %s params %s", in.req.id, in.req.params, m["id"], m["params"])
			}
			if reply := resultReply(in.req.id, json.RawMessage(`{}`)); !json.Valid(reply) {
				t.Fatalf("invalid reply %s", reply)
			}
		}
		if in.refusal != nil {
			var r struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct{ Code int }
			}
			if err := json.Unmarshal(in.refusal, &r); err != nil || r.JSONRPC != "2.0" || r.Error.Code != mcp.INVALID_REQUEST || len(r.ID) == 0 {
				t.Fatalf("refusal %s: %v", in.refusal, err)
			}
		}
	})
}
