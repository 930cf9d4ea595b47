package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

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
	srv := httptest.NewServer(p.HTTPHandler())
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

// A notification sent while a call runs turns the POST's response into an
// SSE stream; the call's response event must still carry the upstream's
// bytes.
func TestHTTPStreamedCallResponse(t *testing.T) {
	fx := connected(echoTool)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/message",
			map[string]any{"level": "info", "data": "working"}); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
		// mcp-go v1.2.1 drops a notification its forwarder dequeued after
		// the handler returned; give the forwarder time to write it.
		time.Sleep(200 * time.Millisecond)
		return json.RawMessage(echoResult), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	srv := startHTTP(t, p)
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.initialize()
	r := c.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
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
	if len(data) != 2 || !strings.Contains(data[0], `"notifications/message"`) || data[1] != want {
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

func TestWireWriterSSE(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), testState(t, p))
	rec := httptest.NewRecorder()
	w := &wireWriter{ResponseWriter: rec, pd: pd}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)

	note := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n"
	resp := "event: message\ndata: " + string(mcpGoList("1")) + "\n\n"
	stream := note + resp
	cut := len(note) + 30 // inside the response's data line
	if _, err := w.Write([]byte(stream[:7])); err != nil {
		t.Fatal(err)
	}
	if rec.Body.Len() != 0 {
		t.Errorf("a partial event was written: %q", rec.Body.String())
	}
	if _, err := w.Write([]byte(stream[7:cut])); err != nil {
		t.Fatal(err)
	}
	if got := rec.Body.String(); got != note {
		t.Errorf("after the first event: %q, want %q", got, note)
	}
	w.Flush()
	if !rec.Flushed {
		t.Error("Flush of an SSE response did not reach the client")
	}
	if _, err := w.Write([]byte(stream[cut:])); err != nil {
		t.Fatal(err)
	}
	w.finish()
	want := note + "event: message\ndata: " + wantList("1") + "\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body =\n%s\nwant\n%s", got, want)
	}
	if rec.Code != http.StatusOK {
		t.Errorf("status %d", rec.Code)
	}
}

func TestWireWriterJSON(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), testState(t, p))
	rec := httptest.NewRecorder()
	w := &wireWriter{ResponseWriter: rec, pd: pd}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "999")
	w.WriteHeader(http.StatusOK)
	body := string(mcpGoList("1")) + "\n"
	if _, err := w.Write([]byte(body[:10])); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if _, err := w.Write([]byte(body[10:])); err != nil {
		t.Fatal(err)
	}
	if rec.Body.Len() != 0 || rec.Flushed {
		t.Fatalf("a JSON response was written before it was complete: %q (flushed %v)", rec.Body.String(), rec.Flushed)
	}
	w.finish()
	want := wantList("1") + "\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body =\n%s\nwant\n%s", got, want)
	}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length %s, want %d", cl, len(want))
	}
}

func TestWireWriterPassesOtherContent(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), testState(t, p))
	rec := httptest.NewRecorder()
	w := &wireWriter{ResponseWriter: rec, pd: pd}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	if _, err := w.Write([]byte("Invalid session ID\n")); err != nil {
		t.Fatal(err)
	}
	w.finish()
	if rec.Code != http.StatusNotFound || rec.Body.String() != "Invalid session ID\n" {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
}
