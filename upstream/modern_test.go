package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// modernServer is a scripted 2026-07-28 Streamable HTTP server: it answers
// server/discover, tools/list (tools), tools/call (its params and headers
// recorded), and holds subscriptions/listen open as an event stream, on
// which the test sends notifications (push).
type modernServer struct {
	tools string // the tools array of tools/list
	// listHints is added to tools/list results (",ttlMs:…"), "" for none.
	listHints string
	lists     int // tools/list requests

	mu sync.Mutex
	// rejects answers the next requests of a method -32022 (their count).
	rejects map[string]int
	seen    []string // "<method> <Mcp-Protocol-Version>" of every request
	calls   []modernRequest
	listens []modernRequest
	gets    int
	streams chan chan string // a new listen stream's channel of events
}

type modernRequest struct {
	header http.Header
	params json.RawMessage
}

func newModernServer(tools string) *modernServer {
	return &modernServer{tools: tools, streams: make(chan chan string, 16)}
}

func (m *modernServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		m.mu.Lock()
		m.gets++
		m.mu.Unlock()
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &msg)
	m.mu.Lock()
	m.seen = append(m.seen, msg.Method+" "+r.Header.Get("Mcp-Protocol-Version"))
	reject := m.rejects[msg.Method] > 0
	if reject {
		m.rejects[msg.Method]--
	}
	m.mu.Unlock()
	if reject {
		writeJSON(w, 400, rpcError(msg.ID, -32022, "Unsupported protocol version", `{"supported":["2026-07-28"],"requested":"x"}`))
		return
	}
	switch msg.Method {
	case "server/discover":
		writeJSON(w, 200, rpcResult(msg.ID, `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}`))
	case "tools/list":
		m.mu.Lock()
		tools, hints := m.tools, m.listHints
		m.lists++
		m.mu.Unlock()
		writeJSON(w, 200, rpcResult(msg.ID, `{"tools":`+tools+hints+`}`))
	case "resources/list", "resources/templates/list":
		writeJSON(w, 200, rpcResult(msg.ID, `{"resources":[],"resourceTemplates":[]}`))
	case "tools/call":
		m.mu.Lock()
		m.calls = append(m.calls, modernRequest{r.Header.Clone(), msg.Params})
		m.mu.Unlock()
		var p struct {
			Name           string          `json:"name"`
			InputResponses json.RawMessage `json:"inputResponses"`
			RequestState   string          `json:"requestState"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		switch {
		case p.Name == "ask" && p.RequestState == "":
			// Two input requests in the first round, a third in the second.
			writeJSON(w, 200, rpcResult(msg.ID, `{"resultType":"input_required","inputRequests":{"who":{"method":"elicitation/create","params":{"message":"Who?","requestedSchema":{"type":"object"}}},"roots":{"method":"roots/list"}},"requestState":"round-1"}`))
		case p.Name == "ask" && p.RequestState == "round-1":
			writeJSON(w, 200, rpcResult(msg.ID, `{"resultType":"input_required","inputRequests":{"llm":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}},"requestState":"round-2"}`))
		case p.Name == "ask":
			writeJSON(w, 200, rpcResult(msg.ID, `{"resultType":"complete","content":[{"type":"text","text":"done"}],"structuredContent":{"last":`+string(p.InputResponses)+`,"state":"`+p.RequestState+`"}}`))
		default:
			writeJSON(w, 200, rpcResult(msg.ID, `{"content":[]}`))
		}
	case "subscriptions/listen":
		m.mu.Lock()
		m.listens = append(m.listens, modernRequest{r.Header.Clone(), msg.Params})
		m.mu.Unlock()
		events := make(chan string, 16)
		m.streams <- events
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fl := w.(http.Flusher)
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{}}}\n\n")
		fl.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-events:
				fmt.Fprintf(w, "data: %s\n\n", ev)
				fl.Flush()
			}
		}
	default:
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		writeJSON(w, 200, rpcError(msg.ID, -32601, "Method not found", ""))
	}
}

func (m *modernServer) lastCall(t *testing.T) modernRequest {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.calls) == 0 {
		t.Fatal("no tools/call reached the server")
	}
	return m.calls[len(m.calls)-1]
}

// nextStream waits for the next subscriptions/listen stream and returns its
// params and a function that sends an event on it.
func (m *modernServer) nextStream(t *testing.T) (json.RawMessage, chan<- string) {
	t.Helper()
	select {
	case ch := <-m.streams:
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.listens[len(m.listens)-1].params, ch
	case <-time.After(10 * time.Second):
		t.Fatal("no subscriptions/listen within 10 s")
		return nil, nil
	}
}

func startModern(t *testing.T, m *modernServer, opts Options) *Conn {
	t.Helper()
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	cfg := httpServer("modern", ts.URL)
	cfg.Protocol = "auto"
	c := start(t, cfg, opts)
	if s := mustConnected(t, c); s.ProtocolVersion != "2026-07-28" {
		t.Fatalf("connected at %q", s.ProtocolVersion)
	}
	return c
}

func noRelay(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return nil, fmt.Errorf("not relayed in this test")
}

// TestModernRequestMeta: in the 2026-07-28 era a request carries the
// version, client info and the capabilities the proxy can honour for the
// client that sent it, and the standard headers; a tool's x-mcp-header
// parameters travel in Mcp-Param-* headers, encoded as SEP-2243 says.
func TestModernRequestMeta(t *testing.T) {
	t.Parallel()
	m := newModernServer(`[{"name":"where","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"note":{"type":"string"}}}}]`)
	c := startModern(t, m, Options{OnRequest: noRelay})
	for _, tc := range []struct {
		name   string
		caps   *string // nil: no client capabilities given
		want   string
		params string
		header map[string]string
	}{
		{"proxy's own", nil, `{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}}`,
			`{"name":"where","arguments":{"region":"eu-west","n":3,"note":"x"}}`,
			map[string]string{"Mcp-Param-Region": "eu-west", "Mcp-Param-N": "3"}},
		{"client without elicitation", ptr(`{"sampling":{},"experimental":{"x":{}}}`), `{"roots":{},"sampling":{}}`,
			`{"name":"where","arguments":{"region":"zürich"}}`,
			map[string]string{"Mcp-Param-Region": "=?base64?esO8cmljaA==?=", "Mcp-Param-N": ""}},
		{"client with elicitation", ptr(`{"elicitation":{"form":{}}}`), `{"elicitation":{"form":{}},"roots":{}}`,
			`{"name":"where","arguments":{"region":" padded "}}`,
			map[string]string{"Mcp-Param-Region": "=?base64?IHBhZGRlZCA=?="}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if tc.caps != nil {
			ctx = WithClientCapabilities(ctx, json.RawMessage(*tc.caps))
		}
		_, err := c.Request(ctx, "tools/call", json.RawMessage(tc.params))
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := m.lastCall(t)
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(got.params, &p)
		if v := string(p.Meta["io.modelcontextprotocol/protocolVersion"]); v != `"2026-07-28"` {
			t.Errorf("%s: _meta protocolVersion %s", tc.name, v)
		}
		if v := canonJSON(p.Meta["io.modelcontextprotocol/clientCapabilities"]); v != tc.want {
			t.Errorf("%s: clientCapabilities %s, want %s", tc.name, v, tc.want)
		}
		for k, want := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "where"} {
			if v := got.header.Get(k); v != want {
				t.Errorf("%s: %s %q, want %q", tc.name, k, v, want)
			}
		}
		for k, want := range tc.header {
			if v := got.header.Get(k); v != want {
				t.Errorf("%s: %s %q, want %q", tc.name, k, v, want)
			}
		}
		if v := got.header.Get("Mcp-Param-Note"); v != "" {
			t.Errorf("%s: an undeclared parameter in a header: %q", tc.name, v)
		}
	}
}

func ptr(s string) *string { return &s }

// canonJSON re-encodes raw with its object members sorted.
func canonJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestModernInvalidHeaderTools: a tool whose x-mcp-header declaration is
// invalid is left out of the catalog with a warning and never called.
func TestModernInvalidHeaderTools(t *testing.T) {
	t.Parallel()
	m := newModernServer(`[
		{"name":"ok","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"}}}},
		{"name":"empty","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}},
		{"name":"object","inputSchema":{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}},
		{"name":"number","inputSchema":{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}},
		{"name":"dup","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}},
		{"name":"chars","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}},
		{"name":"plain","inputSchema":{"type":"object"}}]`)
	var logs logBuffer
	c := startModern(t, m, Options{Logger: testLogger(&logs)})
	if got := strings.Join(toolNames(c.Snapshot().Tools), ","); got != "ok,plain" {
		t.Errorf("catalog %s, want ok,plain", got)
	}
	for _, name := range []string{"empty", "object", "number", "dup", "chars"} {
		if len(logs.lines(`"tool":"`+name+`"`, "x-mcp-header")) == 0 {
			t.Errorf("no warning for %s:\n%s", name, logs.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":{"a":"v"}}`))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "x-mcp-header declaration is invalid") {
			t.Errorf("call %s: %v, want a refusal", name, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.calls) != 0 {
		t.Errorf("%d calls reached the server", len(m.calls))
	}
}

// TestModernListen: in the 2026-07-28 era there is no GET stream: the
// server's notifications come on subscriptions/listen, kept open; a
// list_changed there re-lists, a resources/subscribe becomes the stream's
// resource list (reopened), and resources/updated reaches the proxy.
func TestModernListen(t *testing.T) {
	t.Parallel()
	m := newModernServer(`[{"name":"a","inputSchema":{"type":"object"}}]`)
	notes := make(chan string, 16)
	c := startModern(t, m, Options{OnNotification: func(_, method string, params json.RawMessage) {
		notes <- method + " " + string(params)
	}})
	params, events := m.nextStream(t)
	if got := string(params); !strings.Contains(got, `"toolsListChanged":true`) || strings.Contains(got, "resourceSubscriptions") {
		t.Errorf("first listen params %s", got)
	}
	m.mu.Lock()
	m.tools = `[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{"type":"object"}}]`
	m.mu.Unlock()
	events <- `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"px-1"}}}`
	waitSnapshot(t, c, 10*time.Second, "tool b", func(s *Snapshot) bool { return len(s.Tools) == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := c.Request(ctx, "resources/subscribe", json.RawMessage(`{"uri":"test://watched"}`)); err != nil || string(res) != "{}" {
		t.Fatalf("subscribe: %s, %v", res, err)
	}
	params, events = m.nextStream(t)
	if got := string(params); !strings.Contains(got, `"resourceSubscriptions":["test://watched"]`) {
		t.Errorf("listen params after subscribe %s", got)
	}
	events <- `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched"}}`
	select {
	case n := <-notes:
		if !strings.HasPrefix(n, `notifications/resources/updated {"uri":"test://watched"}`) {
			t.Errorf("notification %s", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("resources/updated not delivered")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gets != 0 {
		t.Errorf("%d GET requests in the 2026-07-28 era", m.gets)
	}
}

// TestModernRetryUnsupportedVersion: a -32022 answer whose supported list
// has a version the proxy speaks is followed by the same request once more
// at that version, for server/discover and for any later request; a second
// -32022 is the request's answer.
func TestModernRetryUnsupportedVersion(t *testing.T) {
	t.Parallel()
	m := newModernServer(`[{"name":"a","inputSchema":{"type":"object"}}]`)
	m.rejects = map[string]int{"server/discover": 1, "tools/call": 1}
	c := startModern(t, m, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"a"}`)); err != nil {
		t.Fatalf("tools/call after one -32022: %v", err)
	}
	m.mu.Lock()
	m.rejects["tools/call"] = 2
	m.mu.Unlock()
	_, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"a"}`))
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32022 {
		t.Errorf("tools/call after two -32022: %v, want the -32022", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var got []string
	for _, l := range m.seen {
		if !strings.HasPrefix(l, "subscriptions/listen") {
			got = append(got, l)
		}
	}
	want := "server/discover 2026-07-28|server/discover 2026-07-28|tools/list 2026-07-28|resources/list 2026-07-28|resources/templates/list 2026-07-28|tools/call 2026-07-28|tools/call 2026-07-28|tools/call 2026-07-28|tools/call 2026-07-28"
	if strings.Join(got, "|") != want {
		t.Errorf("requests\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
}

// TestModernInputRequired: a 2026-07-28 server's input_required result is
// answered through OnRequest (the proxy's clients), round after round, with
// the server's requestState sent back, until the result; a caller that
// asks for them gets the input_required result as it is.
func TestModernInputRequired(t *testing.T) {
	t.Parallel()
	m := newModernServer(`[{"name":"ask","inputSchema":{"type":"object"}}]`)
	var mu sync.Mutex
	var asked []string
	c := startModern(t, m, Options{OnRequest: func(_ context.Context, server, method string, params json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		asked = append(asked, server+" "+method+" "+string(params))
		mu.Unlock()
		switch method {
		case "elicitation/create":
			return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
		case "roots/list":
			return json.RawMessage(`{"roots":[]}`), nil
		default:
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`), nil
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"ask","arguments":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `"structuredContent":{"last":{"llm":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}},"state":"round-2"}`
	if !strings.Contains(string(raw), want) {
		t.Errorf("result %s\nwant it to hold %s", raw, want)
	}
	mu.Lock()
	got := strings.Join(asked, "\n")
	mu.Unlock()
	wantAsked := "modern roots/list {}\nmodern elicitation/create {\"message\":\"Who?\",\"requestedSchema\":{\"type\":\"object\"}}\nmodern sampling/createMessage {\"messages\":[],\"maxTokens\":5}"
	if got != wantAsked {
		t.Errorf("asked\n%s\nwant\n%s", got, wantAsked)
	}
	m.mu.Lock()
	second := string(m.calls[1].params)
	m.mu.Unlock()
	if !strings.Contains(second, `"inputResponses":{"roots":{"roots":[]},"who":{"action":"accept","content":{"name":"Ada"}}}`) ||
		!strings.Contains(second, `"requestState":"round-1"`) || !strings.Contains(second, `"arguments":{"x":1}`) {
		t.Errorf("second round params %s", second)
	}

	raw, err = c.Request(WithInputRequiredPassthrough(ctx), "tools/call", json.RawMessage(`{"name":"ask"}`))
	if err != nil || !strings.Contains(string(raw), `"resultType":"input_required"`) {
		t.Errorf("passthrough: %s, %v", raw, err)
	}
}
