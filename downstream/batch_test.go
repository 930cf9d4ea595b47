package downstream

import (
	"net/http"
	"strings"
	"testing"
)

// batchLine is a JSON-RPC batch of two pings and a notification.
const batchLine = `[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":11,"method":"ping"}]`

// batchServed is what answers batchLine.
const batchServed = `[{"jsonrpc":"2.0","id":10,"result":{}},{"jsonrpc":"2.0","id":11,"result":{}}]`

// MCP has JSON-RPC batches in protocol version 2025-03-26 only: a stdio
// session that negotiated it is served its batches; one that negotiated
// another version, or none yet, gets -32600 saying why.
func TestStdioBatchesByVersion(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	refused := func(why string) string {
		return `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported ` + why + `"}}`
	}
	for _, tt := range []struct{ version, want string }{
		{"", refused("before a protocol version is negotiated (MCP has them only in protocol version 2025-03-26)")},
		{"2025-03-26", batchServed},
		{"2024-11-05", refused("in MCP protocol version 2024-11-05 (added in 2025-03-26)")},
		{"2025-06-18", refused("in MCP protocol version 2025-06-18 (removed in 2025-06-18)")},
		{"2025-11-25", refused("in MCP protocol version 2025-11-25 (removed in 2025-06-18)")},
	} {
		t.Run("version "+tt.version, func(t *testing.T) {
			c := startStdio(t, p)
			if tt.version != "" {
				c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + tt.version + `","capabilities":{}}}`)
				c.recv(`0`)
				c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			c.send(batchLine)
			if got := c.next(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	// Within a 2025-03-26 session's batch, a request that declares the
	// stateless protocol, which has no batches, is refused on its own.
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}}`)
	c.recv(`0`)
	c.send(`[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + modernMeta + `}}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	want := `[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"JSON-RPC batches are not supported in MCP protocol version 2026-07-28 (removed in 2025-06-18)"}},` +
		`{"jsonrpc":"2.0","id":2,"result":{}}]`
	if got := c.next(); got != want {
		t.Errorf("stateless request in a batch:\ngot  %s\nwant %s", got, want)
	}
}

// The same over Streamable HTTP, where a refused batch is HTTP 400; a
// stateless 2026-07-28 batch is refused too.
func TestHTTPBatchesByVersion(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	url := startHTTP(t, p).URL + "/mcp"
	session := func(version string) *httpClient {
		c := &httpClient{t: t, url: url}
		r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{}}}`)
		c.session = r.header.Get("Mcp-Session-Id")
		if r.status != http.StatusOK || c.session == "" {
			t.Fatalf("initialize %s: %d %s", version, r.status, r.body)
		}
		return c
	}
	refused := func(why string) string {
		return `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported ` + why + `"}}`
	}
	stateless := strings.ReplaceAll(batchLine, `"method":"ping"}`, `"method":"tools/list","params":{"_meta":{`+modernMeta+`}}}`)
	for _, tt := range []struct {
		name   string
		c      *httpClient
		header map[string]string
		body   string
		status int
		want   string
	}{
		{"2025-03-26 session", session("2025-03-26"), map[string]string{"MCP-Protocol-Version": "2025-03-26"}, batchLine, http.StatusOK, batchServed},
		{"2025-11-25 session", session("2025-11-25"), nil, batchLine, http.StatusBadRequest, refused("in MCP protocol version 2025-11-25 (removed in 2025-06-18)")},
		{"no session", &httpClient{t: t, url: url}, nil, batchLine, http.StatusBadRequest,
			refused("before a protocol version is negotiated (MCP has them only in protocol version 2025-03-26)")},
		{"stateless", &httpClient{t: t, url: url}, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, stateless, http.StatusBadRequest,
			refused("in MCP protocol version 2026-07-28 (removed in 2025-06-18)")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.c.do(http.MethodPost, tt.body, tt.header)
			if r.status != tt.status || strings.TrimSpace(r.body) != tt.want {
				t.Errorf("got %d %s\nwant %d %s", r.status, r.body, tt.status, tt.want)
			}
		})
	}
}

// A client message that is not valid UTF-8 is refused whole over HTTP:
// 400, -32600, id null (its id is not echoed).
func TestHTTPRefusesInvalidUTF8(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	c := &httpClient{t: t, url: startHTTP(t, p).URL + "/mcp"}
	c.initialize()
	r := c.post("{\"jsonrpc\":\"2.0\",\"id\":\"\xfe\",\"method\":\"ping\"}")
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the message is not valid UTF-8, as JSON text must be (RFC 8259 section 8.1)"}}`
	if r.status != http.StatusBadRequest || strings.TrimSpace(r.body) != want {
		t.Errorf("got %d %q\nwant 400 %s", r.status, r.body, want)
	}
}
