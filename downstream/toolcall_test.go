package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

func TestReadCallParams(t *testing.T) {
	tests := []struct {
		params, name, args, meta, err string
	}{
		{params: `{"name":"a__b","arguments":{"x":1},"_meta":{"progressToken":1}}`, name: "a__b", args: `{"x":1}`, meta: `{"progressToken":1}`},
		{params: `{"name":"a","arguments":null,"_meta":null}`, name: "a", args: `null`},
		{params: `{"name":"a\u0062"}`, name: "ab"},
		{params: `{"name":""}`, name: ""},
		{params: `{"arguments":{}}`, err: "needs a tool name"},
		{params: `{"name":7}`, err: "must be a string"},
		{params: `{"name":"a","arguments":[1]}`, err: "arguments must be an object"},
		{params: `{"name":"a","arguments":"x"}`, err: "arguments must be an object"},
		{params: `{"name":"a","_meta":[]}`, err: "_meta must be an object"},
		{params: `[]`, err: "needs a params object"},
		{params: ``, err: "needs a params object"},
		{params: `{"name":"a",}`, err: "invalid params"},
	}
	for _, tt := range tests {
		c, werr := readCallParams(json.RawMessage(tt.params))
		switch {
		case tt.err != "":
			if werr == nil || werr.Code != codeInvalidParams || !strings.Contains(werr.Message, tt.err) {
				t.Errorf("readCallParams(%s) = %+v; want -32602 mentioning %q", tt.params, werr, tt.err)
			}
		case werr != nil:
			t.Errorf("readCallParams(%s): %v", tt.params, werr)
		case c.name != tt.name || string(c.args) != tt.args || string(c.meta) != tt.meta:
			t.Errorf("readCallParams(%s) = %q %s %s; want %q %s %s", tt.params, c.name, c.args, c.meta, tt.name, tt.args, tt.meta)
		}
	}
}

func TestInflightBounds(t *testing.T) {
	var f inflight
	noop := func() {}
	if f.add(json.RawMessage(`12345678901234567890`), noop) != nil || f.add(json.RawMessage(`12345678901234567891`), noop) != nil {
		t.Fatal("ids that differ beyond float64 precision collided")
	}
	if f.add(json.RawMessage(`"x"`), noop) != nil || f.add(json.RawMessage(`"\u0078"`), noop) != errRepeatedID {
		t.Error("a repeated string id (spelled differently) was taken as a new request")
	}
	for i := f.count(); i < maxInflight; i++ {
		if werr := f.add(json.RawMessage(fmt.Sprint(i+100)), noop); werr != nil {
			t.Fatalf("request %d refused below the bound: %v", i, werr)
		}
	}
	if f.add(json.RawMessage(`"over"`), noop) != errTooMany {
		t.Errorf("request %d taken beyond maxInflight", maxInflight+1)
	}
	f.done(json.RawMessage(`"x"`))
	if f.add(json.RawMessage(`"over"`), noop) != nil {
		t.Error("a freed place was not reused")
	}
}

// A tool call cancelled by the client ends upstream and answers; a
// malformed call gets -32602; a repeated id of a call in flight is refused
// and the first call still answers.
func TestServeStdioCalls(t *testing.T) {
	fx := connected(echoTool)
	upstreamDone := make(chan error, 4)
	waiting := make(chan struct{}, 4)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if strings.Contains(string(params), `"wait"`) {
			waiting <- struct{}{}
			select {
			case <-ctx.Done():
				upstreamDone <- ctx.Err()
				return nil, ctx.Err()
			case <-time.After(5 * time.Second):
				upstreamDone <- nil
			}
		}
		return json.RawMessage(echoResult), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)

	c.initialize()

	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fx__echo","arguments":{"wait":true}}}`)
	<-waiting
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
	if got := c.recv(`5`); !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "still being answered") {
		t.Errorf("repeated id in flight = %s; want a -32600 refusal", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user"}}`)
	select {
	case err := <-upstreamDone:
		if err == nil {
			t.Fatal("the upstream request was not cancelled")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	if got := c.recv(`5`); !strings.Contains(got, "request cancelled") {
		t.Errorf("cancelled call answered %s", got)
	}

	c.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"fx__echo","arguments":[1]}}`)
	if got := c.recv(`6`); !strings.Contains(got, `"code":-32602`) {
		t.Errorf("malformed call = %s; want -32602", got)
	}
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hi"}}}`)
	if got, want := c.recv(`7`), `{"jsonrpc":"2.0","id":7,"result":`+echoResult+`}`; got != want {
		t.Errorf("call = %s\nwant %s", got, want)
	}
}

// A call for a tool whose upstream snapshot has not reached Refresh yet
// (readiness is signalled first) is not "unknown tool": the catalog is
// brought up to date before the call is judged.
func TestCallRefreshesLaggingCatalog(t *testing.T) {
	fx := echoUpstream()
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)
	c.initialize()
	fx.set(upstream.StateConnected, echoTool, `{"name":"late","inputSchema":{"type":"object"}}`) // no Refresh
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__late","arguments":{}}}`)
	if got, want := c.recv(`1`), `{"jsonrpc":"2.0","id":1,"result":`+echoResult+`}`; got != want {
		t.Errorf("call = %s\nwant %s", got, want)
	}
}

// FuzzReadCallParams: the proxy's reading of client params agrees with
// encoding/json on every params object it accepts (name, and the bytes of
// arguments and _meta), and never panics on anything else.
func FuzzReadCallParams(f *testing.F) {
	for _, s := range []string{
		`{"name":"a__b","arguments":{"x":[1,2]},"_meta":{"progressToken":"t"}}`,
		`{"name":"\u00e9\ud83d\ude00","arguments":null}`,
		`{"arguments":{}}`, `{"name":1}`, `[]`, `{"name":"a","name":"b"}`, `{"name":"a"} `,
		`{"name":"a","requestState":"px-\u0041"}`, `{"name":"a","requestState":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		c, werr := readCallParams(params)
		if werr != nil {
			if werr.Code != codeInvalidParams {
				t.Fatalf("code %d for %q", werr.Code, params)
			}
			return
		}
		var ref struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      json.RawMessage `json:"_meta"`
			State     json.RawMessage `json:"requestState"`
		}
		if err := json.Unmarshal(params, &ref); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", params, err)
		}
		if dupKeys(params) || foldedKeys(params) {
			// encoding/json reads the last of equal keys (the route
			// refuses such requests earlier) and matches member names
			// regardless of case (JSON-RPC and MCP do not: "Name" is not
			// the tool name).
			return
		}
		if ref.Name == nil || *ref.Name != c.name {
			t.Fatalf("name %q, encoding/json reads %v (params %q)", c.name, ref.Name, params)
		}
		if string(c.args) != string(ref.Arguments) {
			t.Fatalf("arguments %q, encoding/json reads %q", c.args, ref.Arguments)
		}
		if string(ref.Meta) != "null" && string(c.meta) != string(ref.Meta) {
			t.Fatalf("_meta %q, encoding/json reads %q", c.meta, ref.Meta)
		}
		var refState string
		refOK := json.Unmarshal(ref.State, &refState) == nil && len(ref.State) > 0 && ref.State[0] == '"'
		if state, ok := c.stateString(); ok != refOK || state != refState {
			t.Fatalf("requestState %q (%v), encoding/json reads %q (%v) from %q", state, ok, refState, refOK, ref.State)
		}
	})
}

// foldedKeys reports whether a top-level member name differs from one
// readCallParams reads only in case.
func foldedKeys(obj []byte) bool {
	ms, _ := rawjson.Members(obj)
	for _, m := range ms {
		for _, k := range []string{"name", "arguments", "_meta", "requestState"} {
			if m.Key != k && strings.EqualFold(m.Key, k) {
				return true
			}
		}
	}
	return false
}

// dupKeys reports whether the top-level object repeats a member name.
func dupKeys(obj []byte) bool { return rawjson.Unique(obj) != nil }

// A notifications/cancelled written right behind its tools/call (the same
// write, the next line) cancels the call: the call is registered on the
// read loop, before the next line is read.
func TestServeStdioCancelRightBehindCall(t *testing.T) {
	fx := connected(echoTool)
	upstreamDone := make(chan error, 16)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		select {
		case <-ctx.Done():
			upstreamDone <- ctx.Err()
			return nil, ctx.Err()
		case <-time.After(3 * time.Second):
			upstreamDone <- nil
		}
		return json.RawMessage(echoResult), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)
	c.initialize()
	const n = 10
	for i := range n {
		id := itoa(100 + i)
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"user"}}`)
	}
	lost := 0
	for range n {
		if err := <-upstreamDone; err == nil {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d cancellations right behind their calls were lost", lost, n)
	}
}
