package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A 2026-07-28 client on stdio gets the notifications no request owns
// only through its subscriptions/listen requests, each tagged with the
// listen's id as its subscription id, and only those the listen opted in
// to: a resource update on the listen that names the resource (which the
// proxy subscribed to upstream), a list change on the listen that asked
// for it, no log message and nothing untagged.
func TestStdioListenTagsAndFilters(t *testing.T) {
	fx := connected(`{"name":"t","inputSchema":{"type":"object"}}`)
	snap := *fx.Snapshot()
	snap.Capabilities = upstream.Capabilities{Tools: true, ToolsListChanged: true, Resources: true, ResourcesSubscribe: true, Logging: true}
	snap.Resources = []json.RawMessage{json.RawMessage(`{"uri":"r://1","name":"one"}`), json.RawMessage(`{"uri":"r://2","name":"two"}`)}
	fx.snap.Store(&snap)
	subscribed := make(chan string, 4)
	fx.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "resources/subscribe" {
			subscribed <- string(params)
		}
		return json.RawMessage(`{}`), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)
	meta := `"_meta":{` + modernMeta + `}`
	c.send(`{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fx+r://1"]},` + meta + `}}`)
	if ack := c.next(); !strings.Contains(ack, `"method":"notifications/subscriptions/acknowledged"`) || !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":"L1"`) {
		t.Fatalf("first message %s, want L1's acknowledgement", ack)
	}
	if got := <-subscribed; got != `{"uri":"r://1"}` {
		t.Fatalf("the server was subscribed with %s", got)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta + `}}`)
	if ack := c.next(); !strings.Contains(ack, `"io.modelcontextprotocol/subscriptionId":2`) {
		t.Fatalf("message %s, want listen 2's acknowledgement", ack)
	}

	p.OnUpstreamNotification("fx", "notifications/message", json.RawMessage(`{"level":"error","data":"nobody asked"}`))
	p.OnUpstreamNotification("fx", "notifications/resources/updated", json.RawMessage(`{"uri":"r://2"}`))
	p.OnUpstreamNotification("fx", "notifications/resources/updated", json.RawMessage(`{"uri":"r://1"}`))
	got := c.next()
	if !strings.Contains(got, `"method":"notifications/resources/updated"`) || !strings.Contains(got, `"uri":"fx+r://1"`) ||
		!strings.Contains(got, `"io.modelcontextprotocol/subscriptionId":"L1"`) {
		t.Fatalf("got %s, want r://1's update tagged L1 (and nothing before it)", got)
	}
	fx.set(upstream.StateConnected, `{"name":"t","inputSchema":{"type":"object"}}`, `{"name":"u","inputSchema":{"type":"object"}}`)
	p.Refresh()
	got = c.next()
	if !strings.Contains(got, `"method":"notifications/tools/list_changed"`) || !strings.Contains(got, `"io.modelcontextprotocol/subscriptionId":2`) {
		t.Fatalf("got %s, want tools/list_changed tagged 2 only", got)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta + `}}`)
	if resp := c.next(); !strings.HasPrefix(resp, `{"jsonrpc":"2.0","id":3,"result":`) {
		t.Fatalf("got %s, want the answer to 3: nothing else was to be sent", resp)
	}
}

// A listen's acknowledgement names what it will get: of the resources it
// asked for, only those the proxy subscribed to upstream, not one whose
// server refused the subscription nor one no server has.
func TestListenAcknowledgesOnlyHonouredSubscriptions(t *testing.T) {
	fx := connected(`{"name":"t","inputSchema":{"type":"object"}}`)
	snap := *fx.Snapshot()
	snap.Capabilities = upstream.Capabilities{Tools: true, Resources: true, ResourcesSubscribe: true}
	snap.Resources = []json.RawMessage{json.RawMessage(`{"uri":"r://1","name":"one"}`), json.RawMessage(`{"uri":"r://2","name":"two"}`)}
	fx.snap.Store(&snap)
	fx.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "resources/subscribe" && strings.Contains(string(params), "r://2") {
			return nil, &upstream.RPCError{Code: -32603, Message: "cannot watch r://2"}
		}
		return json.RawMessage(`{}`), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,` +
		`"resourceSubscriptions":["fx+r://2","nowhere+r://9","fx+r://1"]},"_meta":{` + modernMeta + `}}}`)
	want := `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":` +
		`{"toolsListChanged":true,"resourceSubscriptions":["fx+r://1"]},"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}}`
	if ack := c.next(); ack != want {
		t.Fatalf("acknowledgement\n%s\nwant\n%s", ack, want)
	}
}
