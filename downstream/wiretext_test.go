package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// scriptedUpstream is a Streamable HTTP MCP server whose answer to each
// method is the raw result text given (the JSON-RPC envelope around it
// is added), for what no real server library would send.
func scriptedUpstream(t *testing.T, results map[string]string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &m) != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted) // notifications
			return
		}
		result, ok := results[m.Method]
		switch {
		case m.Method == "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"scripted","version":"1"}}`
		case !ok:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// scriptedProxy is a proxy over one real upstream connection (server
// "sc") to a scriptedUpstream, with a stdio client initialized.
func scriptedProxy(t *testing.T, results map[string]string) *stdioClient {
	t.Helper()
	cfg := parseConfig(t, `
startup_wait: 5s
blobs: {mode: passthrough}
servers:
  sc: {url: "`+scriptedUpstream(t, results)+`", timeout: 5s}
`)
	conn := upstream.New(cfg.Servers["sc"], upstream.Options{Logger: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = conn.Close() })
	conn.Start(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for conn.Snapshot().State != upstream.StateConnected {
		if time.Now().After(deadline) {
			t.Fatalf("the scripted upstream did not connect: %v", conn.Snapshot().Err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p := New(Options{Config: cfg, Upstreams: map[string]Upstream{"sc": conn}, Logger: testLogger(), Version: "test"})
	p.Refresh()
	c := startStdio(t, p)
	c.initialize()
	return c
}

// An upstream result that is not an object is no result to pass on: the
// client gets -32603 naming the server, for every method that forwards an
// upstream's result.
func TestUpstreamResultNotObject(t *testing.T) {
	c := scriptedProxy(t, map[string]string{
		"tools/list":     `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`,
		"prompts/list":   `{"prompts":[{"name":"p"}]}`,
		"resources/list": `{"resources":[{"uri":"file:///r","name":"r"}]}`,
		"tools/call":     `null`,
		"prompts/get":    `"text"`,
		"resources/read": `[{"uri":"file:///r","text":"x"}]`,
	})
	for _, tt := range []struct{ req, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sc__t","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"upstream \"sc\" returned an invalid tools/call result: null"}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"sc__p"}}`,
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"upstream \"sc\" returned an invalid prompts/get result: \"text\""}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"sc+file:///r"}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"upstream \"sc\" returned an invalid resources/read result: [{\"uri\":\"file:///r\",\"text\":\"x\"}]"}}`},
	} {
		c.send(tt.req)
		id := tt.req[strings.Index(tt.req, `"id":`)+5 : strings.Index(tt.req, `,"method"`)]
		if got := c.recv(id); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

// Ill-formed UTF-8 in an upstream's result reaches the client as U+FFFD,
// every other byte as the upstream wrote it.
func TestUpstreamTextRepairedOnTheWire(t *testing.T) {
	c := scriptedProxy(t, map[string]string{
		"tools/list": `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`,
		"tools/call": "{\"content\":[{\"type\":\"text\",\"text\":\"a\xff\xfe \xe2\x82 \\ud800 \u00e9\"}],\"x\":1.50}",
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sc__t","arguments":{}}}`)
	want := "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\uFFFD\uFFFD \uFFFD \\ud800 \u00e9\"}],\"x\":1.50}}"
	if got := c.recv(`1`); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
