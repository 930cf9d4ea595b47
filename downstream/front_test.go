package downstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// echoTool is an upstream tool with members mcp-go's types would drop or
// reorder, so that a test can tell the upstream's bytes from mcp-go's.
const echoTool = `{"name":"echo","x-extra":{"keep":[1,2.50,"\u00e9"]},"description":"Echo it",` +
	`"inputSchema":{"type":"object","$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"text":{"type":"string"}}}}`

func frontProxy(t *testing.T) *Proxy {
	t.Helper()
	return newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected(echoTool)})
}

func slotCount(p *Proxy) int {
	p.slots.mu.Lock()
	defer p.slots.mu.Unlock()
	return len(p.slots.m)
}

// mcpGoList is a tools/list response as mcp-go writes it for the shadow tools.
func mcpGoList(id string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"annotations":{},"description":"",` +
		`"inputSchema":{"type":"object"},"name":"fx__echo"}],"resultType":"complete","_meta":{"io.x/k":[1,{"a":null}]}}}`)
}

// exposedEcho is echoTool as the proxy lists it: only the name differs.
var exposedEcho = strings.Replace(echoTool, `"name":"echo"`, `"name":"fx__echo"`, 1)

func wantList(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[` + exposedEcho + `]` +
		`,"resultType":"complete","_meta":{"io.x/k":[1,{"a":null}]}}}`
}

func TestListResponseCarriesCatalogBytes(t *testing.T) {
	tests := []struct {
		name      string
		reqID     string
		respID    string
		rewritten bool
	}{
		{"number", `1`, `1`, true},
		{"string", `"1"`, `"1"`, true},
		// Ids mcp-go would not echo exactly get a surrogate (respID "" =
		// mcp-go echoes the surrogate it was given).
		{"float spelling", `1.0`, ``, true},
		{"exponent spelling", `1e2`, ``, true},
		{"big integer", `12345678901234567890`, ``, true},
		{"negative", `-7`, `-7`, true},
		{"escaped string", `"a\u0062"`, ``, true},
		{"html in string", `"<x>"`, ``, true},
		{"string request, number response", `"1"`, `1`, false},
		{"number request, string response", `1`, `"1"`, false},
		{"other id", `1`, `2`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := frontProxy(t)
			pd := newPending(p)
			req := []byte(`{"jsonrpc":"2.0","id":` + tt.reqID + `,"method":"tools/list","params":{}}`)
			out, wait := pd.inbound(req, testState(t, p))
			if wait {
				t.Fatal("inbound asked to wait for a tools/list")
			}
			respID := tt.respID
			if respID == "" {
				sur, _, _ := rawjson.Get(out, "id")
				if !strings.HasPrefix(string(sur), `"mcp-proxy-id-`) {
					t.Fatalf("unsafe id %s reached mcp-go as %s", tt.reqID, sur)
				}
				respID = string(sur)
			} else if !sameBytes(out, req) {
				t.Fatalf("inbound changed a tools/list request with a safe id: %s", out)
			}
			resp := mcpGoList(respID)
			got := pd.outbound(resp)
			if !tt.rewritten {
				if !sameBytes(got, resp) {
					t.Fatalf("outbound = %s, want the same slice", got)
				}
				return
			}
			// The client's own id bytes come back, not mcp-go's re-encoding.
			if want := wantList(tt.reqID); string(got) != want {
				t.Fatalf("outbound =\n%s\nwant\n%s", got, want)
			}
			if !pd.empty() {
				t.Error("entry still pending after its response")
			}
			// A second response with that id is no longer noted.
			if again := pd.outbound(resp); !sameBytes(again, resp) {
				t.Errorf("second outbound = %s, want the same slice", again)
			}
		})
	}
}

func TestListResponseToolsAreUpstreamBytes(t *testing.T) {
	p := frontProxy(t)
	want := `[` + exposedEcho + `]`
	if got := string(p.Catalog().ListJSON()); got != want {
		t.Fatalf("ListJSON =\n%s\nwant\n%s", got, want)
	}
}

func TestListErrorResponsePasses(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	pd.inbound([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`), testState(t, p))
	resp := []byte(`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"invalid cursor"}}`)
	if got := pd.outbound(resp); !sameBytes(got, resp) {
		t.Fatalf("outbound = %s, want the error as it is", got)
	}
}

// callMeta decodes the _meta of a tools/call request as mcp-go does.
func callMeta(t *testing.T, msg []byte) *mcp.Meta {
	t.Helper()
	var req struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg, &req); err != nil {
		t.Fatalf("decode %s: %v", msg, err)
	}
	return req.Params.Meta
}

func TestCallInboundAddsSlotMarker(t *testing.T) {
	tests := []struct {
		name     string
		params   string
		wantMeta string // the _meta of the rewritten request, with TOK for the token
		slotMeta string // what the slot keeps of the client's _meta
	}{
		{
			name:     "no _meta",
			params:   `{"name":"fx__echo","arguments":{"text":"hi"}}`,
			wantMeta: `{"io.github.mcp-proxy/slot":TOK}`,
		},
		{
			name:     "null _meta",
			params:   `{"name":"fx__echo","_meta":null,"arguments":{"text":"hi"}}`,
			wantMeta: `{"io.github.mcp-proxy/slot":TOK}`,
		},
		{
			name:     "empty _meta",
			params:   `{"name":"fx__echo","_meta":{},"arguments":{}}`,
			wantMeta: `{"io.github.mcp-proxy/slot":TOK}`,
			slotMeta: `{}`,
		},
		{
			name:     "existing _meta",
			params:   `{"_meta":{"progressToken":"p-1","io.x/y":[1, 2]},"name":"fx__echo","arguments":{"n":18446744073709551615}}`,
			wantMeta: `{"progressToken":"p-1","io.x/y":[1, 2],"io.github.mcp-proxy/slot":TOK}`,
			slotMeta: `{"progressToken":"p-1","io.x/y":[1, 2]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := frontProxy(t)
			pd := newPending(p)
			req := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + tt.params + `}`)
			orig := append([]byte(nil), req...)
			out, wait := pd.inbound(req, testState(t, p))
			if wait {
				t.Error("wait = true for a known tool")
			}
			if !bytes.Equal(req, orig) {
				t.Fatal("inbound modified its input")
			}
			meta := callMeta(t, out)
			tok, _ := meta.AdditionalFields[slotMetaKey].(string)
			if tok == "" {
				t.Fatalf("no slot token in %s", out)
			}
			params, _, _ := rawjson.Get(out, "params")
			gotMeta, _, _ := rawjson.Get(params, "_meta")
			if want := strings.Replace(tt.wantMeta, "TOK", string(rawjson.String(tok)), 1); string(gotMeta) != want {
				t.Errorf("_meta = %s, want %s", gotMeta, want)
			}
			// Everything but _meta is the client's bytes.
			for _, key := range []string{"name", "arguments"} {
				a, _, _ := rawjson.Get([]byte(tt.params), key)
				b, _, _ := rawjson.Get(params, key)
				if !bytes.Equal(a, b) {
					t.Errorf("params.%s = %s, want %s", key, b, a)
				}
			}
			sl := p.slots.fromMeta(meta)
			if sl == nil {
				t.Fatal("slot not found from the rewritten _meta")
			}
			if sl.name != "fx__echo" || string(sl.meta) != tt.slotMeta {
				t.Errorf("slot name %q meta %s, want fx__echo %s", sl.name, sl.meta, tt.slotMeta)
			}
		})
	}
}

// noteCall passes a tools/call through inbound and returns its slot.
func noteCall(t *testing.T, p *Proxy, pd *pending, id, params string) *slot {
	t.Helper()
	out, _ := pd.inbound([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":`+params+`}`), testState(t, p))
	sl := p.slots.fromMeta(callMeta(t, out))
	if sl == nil {
		t.Fatalf("no slot for %s", out)
	}
	return sl
}

func TestCallOutboundWritesSlot(t *testing.T) {
	const raw = `{"content":[{"type":"text","text":"hi","x-future":true}], "structuredContent":{"n":18446744073709551615},"extra":{}}`
	tests := []struct {
		name        string
		result      string
		err         *wireError
		placeholder string
		want        string
	}{
		{
			name:        "result",
			result:      raw,
			placeholder: `{"jsonrpc":"2.0","id":"c-1","result":{"content":[]}}`,
			want:        `{"jsonrpc":"2.0","id":"c-1","result":` + raw + `}`,
		},
		{
			name:        "error",
			err:         &wireError{Code: -32099, Message: "fixture rpc_error: requested error"},
			placeholder: `{"jsonrpc":"2.0","id":"c-1","error":{"code":-32603,"message":"fixture rpc_error: requested error"}}`,
			want:        `{"jsonrpc":"2.0","id":"c-1","error":{"code":-32099,"message":"fixture rpc_error: requested error"}}`,
		},
		{
			name:        "timeout error",
			err:         &wireError{Code: codeTimeout, Message: "MCP tool call 'fx__echo' timed out after 5s"},
			placeholder: `{"jsonrpc":"2.0","id":"c-1","error":{"code":-32603,"message":"x"}}`,
			want:        `{"jsonrpc":"2.0","id":"c-1","error":{"code":-32001,"message":"MCP tool call 'fx__echo' timed out after 5s"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := frontProxy(t)
			pd := newPending(p)
			sl := noteCall(t, p, pd, `"c-1"`, `{"name":"fx__echo"}`)
			sl.set(json.RawMessage(tt.result), tt.err)
			if got := string(pd.outbound([]byte(tt.placeholder))); got != tt.want {
				t.Fatalf("outbound =\n%s\nwant\n%s", got, tt.want)
			}
			if n := slotCount(p); n != 0 {
				t.Errorf("%d slots left after the response", n)
			}
			if !pd.empty() {
				t.Error("entry still pending")
			}
		})
	}
}

func TestServerRequestWithPendingIDIsNotTheResponse(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	sl := noteCall(t, p, pd, `1`, `{"name":"fx__echo"}`)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}`,
		`{"method":"roots/list","jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"result":{}}}`,
	} {
		b := []byte(msg)
		if got := pd.outbound(b); !sameBytes(got, b) {
			t.Fatalf("outbound(%s) = %s, want the same slice", msg, got)
		}
	}
	if pd.empty() {
		t.Fatal("a server request consumed the pending call")
	}
	sl.set(json.RawMessage(`{"content":[]}`), nil)
	got := pd.outbound([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"placeholder"}]}}`))
	if want := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`; string(got) != want {
		t.Fatalf("response = %s, want %s", got, want)
	}
}

func TestResponseToUnnotedIDPassesSameSlice(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	msgs := []string{
		`{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`,
		`{"jsonrpc":"2.0","id":"1","result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
	}
	check := func() {
		t.Helper()
		for _, m := range msgs {
			b := []byte(m)
			if got := pd.outbound(b); !sameBytes(got, b) {
				t.Errorf("outbound(%s) = %s, want the same slice", m, got)
			}
		}
	}
	check() // nothing pending
	pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), testState(t, p))
	check() // id 1 pending
	if pd.empty() {
		t.Error("pending tools/list consumed by another id")
	}
}

func TestNotFoundBecomesUnknownTool(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	noteCall(t, p, pd, `3`, `{"name":"nope","arguments":{}}`)
	got := pd.outbound([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"tool 'nope' not found: tool not found"}}`))
	if want := `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool: nope"}}`; string(got) != want {
		t.Fatalf("outbound = %s, want %s", got, want)
	}

	// Other errors mcp-go answers on its own pass as they are.
	noteCall(t, p, pd, `4`, `{"name":"nope"}`)
	other := []byte(`{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Invalid request"}}`)
	if got := pd.outbound(other); !sameBytes(got, other) {
		t.Fatalf("outbound = %s, want the same slice", got)
	}
}

// A -32602 that mcp-go sends for another reason than a missing tool (here:
// a 2026-07-28 request without the required client capabilities) must
// reach the client as it is, not as "unknown tool" for a tool that exists.
func TestInvalidParamsOtherThanNotFoundPasses(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	noteCall(t, p, pd, `5`, `{"name":"fx__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"missing or invalid _meta field io.modelcontextprotocol/clientCapabilities"}}`)
	if got := pd.outbound(resp); string(got) != string(resp) {
		t.Fatalf("outbound =\n%s\nwant mcp-go's error unchanged:\n%s", got, resp)
	}
}

func TestModernCallGetsResultType(t *testing.T) {
	tests := []struct {
		name   string
		meta   string
		result string
		want   string
	}{
		{"modern", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
			`{"content":[]}`, `{"content":[],"resultType":"complete"}`},
		{"modern keeps its own resultType", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
			`{"content":[],"resultType":"input_required"}`, `{"content":[],"resultType":"input_required"}`},
		{"legacy version in _meta", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}`,
			`{"content":[]}`, `{"content":[]}`},
		{"no _meta", ``, `{"content":[]}`, `{"content":[]}`},
		{"version not a string", `,"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}`,
			`{"content":[]}`, `{"content":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := frontProxy(t)
			pd := newPending(p)
			sl := noteCall(t, p, pd, `9`, `{"name":"fx__echo"`+tt.meta+`}`)
			sl.set(json.RawMessage(tt.result), nil)
			got := pd.outbound([]byte(`{"jsonrpc":"2.0","id":9,"result":{"content":[],"resultType":"complete"}}`))
			if want := `{"jsonrpc":"2.0","id":9,"result":` + tt.want + `}`; string(got) != want {
				t.Fatalf("outbound = %s, want %s", got, want)
			}
		})
	}
}

func TestInboundMalformedPassesUnchanged(t *testing.T) {
	msgs := []string{
		``,
		`{`,
		`not json`,
		`[]`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"fx__echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":5}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":[1]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo"},}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":5}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
	}
	for _, m := range msgs {
		p := frontProxy(t)
		pd := newPending(p)
		b := []byte(m)
		out, wait := pd.inbound(b, testState(t, p))
		if !sameBytes(out, b) && !(len(b) == 0 && len(out) == 0) {
			t.Errorf("inbound(%q) = %q, want the same slice", m, out)
		}
		if wait {
			t.Errorf("inbound(%q): wait = true", m)
		}
		if !pd.empty() || slotCount(p) != 0 {
			t.Errorf("inbound(%q) noted something", m)
		}
	}
}

func TestOutboundMalformedPassesUnchanged(t *testing.T) {
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"result":`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":}}`,
		`{"jsonrpc":"2.0","id":1,"result":[1,2]}`,
		`{"jsonrpc":"2.0","id":1,"error":`,
		`not json`,
		``,
	}
	for _, m := range msgs {
		p := frontProxy(t)
		pd := newPending(p)
		pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), testState(t, p))
		b := []byte(m)
		if got := pd.outbound(b); string(got) != m {
			t.Errorf("outbound(%q) = %q, want it unchanged", m, got)
		}

		p = frontProxy(t)
		pd = newPending(p)
		noteCall(t, p, pd, `1`, `{"name":"fx__echo"}`)
		if got := pd.outbound(b); string(got) != m {
			t.Errorf("call outbound(%q) = %q, want it unchanged", m, got)
		}
	}
}

func TestResponseID(t *testing.T) {
	tests := []struct {
		msg  string
		id   string
		isOK bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, `1`, true},
		{`{"result":{"id":9,"x":[1]},"id":2,"jsonrpc":"2.0"}`, `2`, true},
		{`{"error":{"code":1,"message":"m"},"jsonrpc":"2.0","id":"x"}`, `"x"`, true},
		{` { "jsonrpc" : "2.0" , "id" : "a b" , "result" : null } `, `"a b"`, true},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, `null`, true},
		{`{"id":1.5e3,"result":{}}`, `1.5e3`, true},
		{`{"id":1,"method":"x","params":{}}`, ``, false},
		{`{"method":"x","id":1}`, ``, false},
		{`{"result":{},"method":"x","id":1}`, ``, false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1}}`, ``, false},
		{`{"jsonrpc":"2.0","id":1}`, ``, false},
		{`{"jsonrpc":"2.0","result":{}}`, ``, false},
		{`{"jsonrpc":"2.0","id":1,"result":`, `1`, true}, // the value is never read
		{`{"jsonrpc":"2.0","result":{"a":}, "id":1}`, ``, false},
		{`[{"id":1,"result":{}}]`, ``, false},
		{`"id"`, ``, false},
		{``, ``, false},
		{`{"id":}`, ``, false},
	}
	for _, tt := range tests {
		id, ok := responseID([]byte(tt.msg))
		if !ok {
			id = nil // the id is meaningless when msg is not a response
		}
		if ok != tt.isOK || string(id) != tt.id {
			t.Errorf("responseID(%s) = %s, %v; want %s, %v", tt.msg, id, ok, tt.id, tt.isOK)
		}
	}
}

func TestIDKey(t *testing.T) {
	same := [][2]string{{`1`, `1.0`}, {`1`, `1e0`}, {`"x"`, `"\u0078"`}}
	for _, pair := range same {
		if a, b := idKey(json.RawMessage(pair[0])), idKey(json.RawMessage(pair[1])); a != b {
			t.Errorf("idKey(%s) = %q, idKey(%s) = %q; want equal", pair[0], a, pair[1], b)
		}
	}
	differ := [][2]string{{`1`, `"1"`}, {`1`, `2`}, {`"a"`, `"A"`}, {`null`, `"null"`}}
	for _, pair := range differ {
		if a, b := idKey(json.RawMessage(pair[0])), idKey(json.RawMessage(pair[1])); a == b {
			t.Errorf("idKey(%s) == idKey(%s) == %q; want different", pair[0], pair[1], a)
		}
	}
}

func TestCallWaitsForStartupOnlyForUnknownTools(t *testing.T) {
	never := make(chan struct{})
	slow := &fakeUpstream{ReadyFn: func() <-chan struct{} { return never }}
	p := newProxy(t, `
startup_wait: 30s
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
  slow: {command: fixture}
`, map[string]*fakeUpstream{"fx": connected(echoTool), "slow": slow})
	pd := newPending(p)
	if _, wait := pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow__x"}}`), testState(t, p)); !wait {
		t.Error("unknown tool while a server is starting: wait = false")
	}
	if _, wait := pd.inbound([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__echo"}}`), testState(t, p)); wait {
		t.Error("known tool: wait = true")
	}

	// startup_wait 0: never wait.
	p0 := newProxy(t, `
startup_wait: 0
blobs: {mode: passthrough}
servers:
  slow: {command: fixture}
`, map[string]*fakeUpstream{"slow": {ReadyFn: func() <-chan struct{} { return never }}})
	if _, wait := newPending(p0).inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow__x"}}`), testState(t, p0)); wait {
		t.Error("startup_wait 0: wait = true")
	}
}

func TestPendingReleaseAndReuseDropSlots(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	noteCall(t, p, pd, `1`, `{"name":"fx__echo"}`)
	noteCall(t, p, pd, `1`, `{"name":"fx__echo"}`) // same id again: the first slot goes
	if n := slotCount(p); n != 1 {
		t.Errorf("%d slots after reusing an id, want 1", n)
	}
	noteCall(t, p, pd, `2`, `{"name":"fx__echo"}`)
	if !pd.callsInFlight() {
		t.Error("callsInFlight = false with two calls noted")
	}
	pd.release()
	if n := slotCount(p); n != 0 || !pd.empty() || pd.callsInFlight() {
		t.Errorf("after release: %d slots, empty %v", n, pd.empty())
	}
}

func TestCallsInFlightIgnoresLists(t *testing.T) {
	p := frontProxy(t)
	pd := newPending(p)
	pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), testState(t, p))
	if pd.callsInFlight() {
		t.Error("callsInFlight = true with only a tools/list pending")
	}
}

// A down server's tool keeps its route: the wire layer notes calls to it
// and they are answered by the handler with "not connected".
func TestSlotForDownServerTool(t *testing.T) {
	fx := connected(echoTool)
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	fx.set(upstream.StateFailed)
	p.Refresh()
	pd := newPending(p)
	if _, wait := pd.inbound([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo"}}`), testState(t, p)); wait {
		t.Error("wait = true for a known (down) tool")
	}
	if pd.empty() {
		t.Error("call to a down server's tool not noted")
	}
}

func FuzzWireLayer(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":{"a":1}}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`),
		[]byte(`{"jsonrpc":"2.0","id":"a","result":{"tools":[]}}`))
	f.Add([]byte(`{"id":1e400,"method":"tools/list"}`), []byte(`{"id":1e400,"result":{}}`))
	p := newProxy(f, oneServerYAML, map[string]*fakeUpstream{"fx": connected(echoTool)})
	f.Fuzz(func(t *testing.T, in, out []byte) {
		pd := newPending(p)
		defer pd.release()
		orig := append([]byte(nil), in...)
		got, _ := pd.inbound(in, testState(t, p))
		if !bytes.Equal(in, orig) {
			t.Fatal("inbound modified its input")
		}
		if !sameBytes(got, in) && !json.Valid(got) {
			t.Fatalf("inbound produced invalid JSON: %q", got)
		}
		origOut := append([]byte(nil), out...)
		res := pd.outbound(out)
		if !bytes.Equal(out, origOut) {
			t.Fatal("outbound modified its input")
		}
		if !sameBytes(res, out) && !json.Valid(res) {
			t.Fatalf("outbound produced invalid JSON %q from %q", res, out)
		}
	})
}

func FuzzResponseID(f *testing.F) {
	for _, s := range []string{`{"id":1,"result":{}}`, `{"result":{},"id":"x"}`, `{"id":1,"method":"m"}`, `{`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		id, ok := responseID(msg)
		if ok && !json.Valid(id) {
			t.Fatalf("responseID(%q) = %q, not JSON", msg, id)
		}
	})
}
