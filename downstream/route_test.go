package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// echoTool is an upstream tool with members a typed encoder would drop or
// reorder, so that a test can tell the upstream's bytes from re-encoded
// ones.
const echoTool = `{"name":"echo","x-extra":{"keep":[1,2.50,"\u00e9"]},"description":"Echo it",` +
	`"inputSchema":{"type":"object","$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"text":{"type":"string"}}}}`

// exposedEcho is echoTool as the proxy lists it: only the name differs.
var exposedEcho = strings.Replace(echoTool, `"name":"echo"`, `"name":"fx__echo"`, 1)

// responseID returns the id of msg when msg is a JSON-RPC response.
func responseID(msg []byte) (json.RawMessage, bool) {
	m, err := rawjson.ParseMessage(msg)
	if err != nil || m.Kind != rawjson.KindResponse && !(m.Kind == rawjson.KindInvalid && m.Error != nil) {
		return nil, false
	}
	if m.ID == nil {
		return json.RawMessage("null"), true
	}
	return m.ID, true
}

// The route answers every message shape the way JSON-RPC 2.0 and MCP ask,
// and echoes request ids as the client wrote them.
func TestRouteWire(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	c := startStdio(t, p)
	c.initialize()
	tests := []struct {
		name, in, id, want string
	}{
		{"big integer id", `{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}`, `18446744073709551615`,
			`{"jsonrpc":"2.0","id":18446744073709551615,"result":{}}`},
		{"escaped string id", `{"jsonrpc":"2.0","id":"a\u00e9\"b","method":"ping"}`, `"a\u00e9\"b"`,
			`{"jsonrpc":"2.0","id":"a\u00e9\"b","result":{}}`},
		{"fraction id", `{"jsonrpc":"2.0","id":1.50,"method":"ping"}`, `1.50`, `{"jsonrpc":"2.0","id":1.50,"result":{}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"nope/x"}`, `3`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found: nope/x"}}`},
		{"no jsonrpc", `{"id":4,"method":"ping"}`, `4`,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"invalid request: \"jsonrpc\" must be \"2.0\""}}`},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, `null`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the id must be a string or a number, not null"}}`},
		{"repeated member", `{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}`, `null`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: a member name appears twice"}}`},
		{"repeated params member", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","name":"x"}}`, `7`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"invalid request: a member name appears twice in params"}}`},
		{"not JSON", `{"jsonrpc":`, `null`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"invalid level", `{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"loud"}}`, `8`,
			`{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"invalid logging level \"loud\""}}`},
		{"discover needs the stateless protocol", `{"jsonrpc":"2.0","id":9,"method":"server/discover"}`, `9`,
			`{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"\"server/discover\" requires protocol version 2026-07-28 or later"}}`},
		{"batch", `[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":11,"method":"ping"}]`, ``,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported in MCP protocol version 2025-11-25 (removed in 2025-06-18)"}}`},
		{"invalid UTF-8 in the id", "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"ping\"}", `null`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the message is not valid UTF-8, as JSON text must be (RFC 8259 section 8.1)"}}`},
		{"invalid UTF-8 in params", "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"fx__echo\",\"arguments\":{\"text\":\"\xc3\"}}}", `null`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the message is not valid UTF-8, as JSON text must be (RFC 8259 section 8.1)"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.send(tt.in)
			var got string
			if tt.id == "" {
				got = c.next()
			} else {
				got = c.recv(tt.id)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// A stateless 2026-07-28 request needs no handshake; its result says it is
// complete, names the proxy, and (for a list) is not to be cached; the
// methods that revision removed are refused.
func TestRouteStateless(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	c := startStdio(t, p)
	meta := `"_meta":{` + modernMeta + `}`
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`)
	want := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + exposedEcho + `],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcp-proxy","version":"test"}},` +
		`"resultType":"complete","ttlMs":0,"cacheScope":"private"}}`
	if got := c.recv(`1`); got != want {
		t.Errorf("tools/list\ngot  %s\nwant %s", got, want)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{` + meta + `}}`)
	got := c.recv(`2`)
	for _, part := range []string{`"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`,
		`"capabilities":{"tools":{"listChanged":true}}`, `"resultType":"complete"`} {
		if !strings.Contains(got, part) {
			t.Errorf("discover = %s; lacks %s", got, part)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"ping","params":{` + meta + `}}`)
	if got := c.recv(`3`); !strings.Contains(got, `"code":-32601`) || !strings.Contains(got, `\"ping\" was removed in protocol version 2026-07-28`) {
		t.Errorf("stateless ping = %s", got)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if got := c.recv(`4`); !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, "clientCapabilities") {
		t.Errorf("stateless request without capabilities = %s", got)
	}
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if got := c.recv(`5`); !strings.Contains(got, `"code":-32022`) || !strings.Contains(got, `"data":{"requested":"2027-01-01","supported":["2026-07-28"`) {
		t.Errorf("unsupported version = %s", got)
	}
}

// initialize answers the version asked for when the proxy serves it, the
// latest session version for one it does not know, and 2025-03-26 when none
// is given; its result is what SDK clients expect byte for byte.
func TestInitializeVersions(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	for asked, want := range map[string]string{`"2024-11-05"`: "2024-11-05", `"2025-06-18"`: "2025-06-18", `"1999-01-01"`: "2025-11-25",
		`"2026-07-28"`: "2025-11-25", `""`: "2025-03-26"} {
		c := startStdio(t, p)
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":` + asked + `,"capabilities":{}}}`)
		got := c.recv(`1`)
		wantResp := `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"` + want + `","capabilities":{"tools":{"listChanged":true}},` +
			`"serverInfo":{"name":"mcp-proxy","version":"test"}}}`
		if got != wantResp {
			t.Errorf("initialize %s\ngot  %s\nwant %s", asked, got, wantResp)
		}
		c.finish()
	}
}

// FuzzReceive: any line a client sends is answered with at most one
// well-formed reply that never names an id the line did not carry, and the
// route never panics.
func FuzzReceive(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"id":1e400,"method":"ping"}`, `[]`, `{`, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":[]}`,
	} {
		f.Add([]byte(s))
	}
	p := newProxy(f, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	a, _ := p.views.resolveAgent("")
	f.Fuzz(func(t *testing.T, line []byte) {
		s := newSession("fuzz", transportStdio, a, nil)
		defer s.close()
		msg, code, run := p.route.receive(context.Background(), s, line, noStream{})
		if run != nil {
			if msg != nil {
				t.Fatal("both a reply and work for one message")
			}
			var r reply
			r, code = run()
			msg = r.bytes()
		}
		if msg == nil {
			if code != 0 {
				t.Fatalf("no reply to %q, but code %d", line, code)
			}
			return
		}
		m, err := rawjson.ParseMessage(msg)
		if err != nil || m.Kind != rawjson.KindResponse && m.Error == nil {
			t.Fatalf("reply %q to %q is not a JSON-RPC response: %v", msg, line, err)
		}
		var e struct {
			Code int `json:"code"`
		}
		if m.Error != nil && json.Unmarshal(m.Error, &e) != nil {
			t.Fatalf("reply %q to %q: unreadable error", msg, line)
		}
		if code != e.Code {
			t.Fatalf("reply %q to %q comes with code %d; its error code is %d", msg, line, code, e.Code)
		}
		if in, err := rawjson.ParseMessage(line); err == nil && in.ID != nil && string(m.ID) != "null" && string(m.ID) != string(in.ID) {
			t.Fatalf("reply id %s, request id %s", m.ID, in.ID)
		}
	})
}

// sameBytes reports whether a and b are the same slice (not just equal).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// TestCallToolTakesTheRoute: the `call` verb's tools/call passes the
// route's middleware like a client's: it is counted among the requests.
func TestCallToolTakesTheRoute(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{Config: parseConfig(t, oneServerYAML), Upstreams: map[string]Upstream{"fx": echoUpstream()},
		Logger: zerolog.Nop(), Version: "test", Metrics: m})
	p.Refresh()
	if _, err := p.CallTool(context.Background(), "", nil, "fx__echo", json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	_, err = p.CallTool(context.Background(), "", nil, "fx__nope", nil)
	if err == nil || err.Error() != "unknown tool: fx__nope" {
		t.Fatalf("unknown tool: %v", err)
	}
	for outcome, want := range map[string]float64{"ok": 1, "error": 1} {
		labels := map[string]string{"method": "tools/call", "outcome": outcome}
		if got := counterValue(t, reg, "mcp_proxy_requests_total", labels); got != want {
			t.Errorf("requests %v = %v, want %v", labels, got, want)
		}
	}
}

// TestNotificationTakesTheMiddleware: a client notification passes the
// route's middleware: a handler that panics is recovered and logged, and
// the route goes on serving; notifications are not counted as requests.
func TestNotificationTakesTheMiddleware(t *testing.T) {
	var logs strings.Builder
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	rt := newRouter(newEnv(Options{Config: parseConfig(t, oneServerYAML), Logger: zerolog.New(&logs), Metrics: m}))
	rt.serve(map[string]handler{"ping": func(context.Context, *request) (json.RawMessage, *wireError) {
		return json.RawMessage(`{}`), nil
	}}, map[string]handler{"notifications/boom": func(context.Context, *request) (json.RawMessage, *wireError) {
		panic("boom")
	}})
	a, err := filter.Resolve(parseConfig(t, oneServerYAML), config.ImplicitAgent)
	if err != nil {
		t.Fatal(err)
	}
	s := newSession("test", transportStdio, a, nil)
	out := &recordStream{}
	refusal, _, run := rt.receive(context.Background(), s, []byte(`{"jsonrpc":"2.0","method":"notifications/boom"}`), out)
	if refusal != nil || run != nil {
		t.Fatalf("notification: refusal %s, run %v", refusal, run != nil)
	}
	if !strings.Contains(logs.String(), `"method":"notifications/boom","panic":"boom"`) {
		t.Errorf("the panic was not logged: %s", logs.String())
	}
	_, _, run = rt.receive(context.Background(), s, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), out)
	if resp, code := run(); code != 0 || string(resp.bytes()) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("ping after the panic = %s (%d)", resp.bytes(), code)
	}
	if got := counterValue(t, reg, "mcp_proxy_requests_total", map[string]string{"method": "notifications/boom"}); got != 0 {
		t.Errorf("the notification was counted as a request: %v", got)
	}
}
