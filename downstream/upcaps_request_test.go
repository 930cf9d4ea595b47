package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Every request the proxy sends upstream for a client carries that
// client's capabilities (what the proxy can honour of them), which a
// 2026-07-28 upstream is told in the request's _meta: not only tools/call
// but resources/read, prompts/get, completion/complete and the resource
// subscriptions too, for a session client (from its initialize) and for a
// stateless one (from the request's _meta). Elicitation is declared only
// for a client that can be asked.
func TestRequestsCarryTheClientsCapabilities(t *testing.T) {
	fx := connected(`{"name":"echo","inputSchema":{"type":"object"}}`)
	snap := *fx.Snapshot()
	snap.Capabilities = upstream.Capabilities{Tools: true, Resources: true, ResourcesSubscribe: true, Prompts: true, Completions: true}
	snap.Resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///a","name":"a"}`)}
	snap.Prompts = []json.RawMessage{json.RawMessage(`{"name":"greet"}`)}
	fx.snap.Store(&snap)
	var mu sync.Mutex
	seen := map[string]string{} // method -> capabilities the request carried
	fx.RequestFn = func(ctx context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		caps, ok := upstream.ClientCapabilities(ctx)
		mu.Lock()
		seen[method] = string(caps)
		if !ok {
			seen[method] = "(none: the proxy's own)"
		}
		mu.Unlock()
		switch method {
		case "resources/read":
			return json.RawMessage(`{"contents":[]}`), nil
		case "prompts/get":
			return json.RawMessage(`{"messages":[]}`), nil
		case "completion/complete":
			return json.RawMessage(`{"completion":{"values":[]}}`), nil
		}
		return json.RawMessage(`{}`), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	requests := []struct{ method, params string }{
		{"tools/call", `{"name":"fx__echo","arguments":{}`},
		{"resources/read", `{"uri":"fx+file:///a"`},
		{"prompts/get", `{"name":"fx__greet"`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"fx__greet"},"argument":{"name":"a","value":""}`},
		{"resources/subscribe", `{"uri":"fx+file:///a"`},
		{"resources/unsubscribe", `{"uri":"fx+file:///a"`},
	}
	for _, client := range []struct {
		name, initCaps, meta string
		want                 string
	}{
		{"session client with sampling", `{"sampling":{}}`, "", `{"sampling":{}}`},
		{"session client with elicitation", `{"elicitation":{},"roots":{}}`, "", `{"elicitation":{"form":{}}}`},
		{"stateless client with sampling and URL elicitation",
			"", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"url":{}}}}`,
			`{"elicitation":{"url":{}},"sampling":{}}`},
	} {
		t.Run(client.name, func(t *testing.T) {
			s := testState(t, p)
			if client.initCaps != "" {
				answerLine(t, p, s, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+client.initCaps+`,"clientInfo":{"name":"c","version":"1"}}}`)
			}
			for _, rq := range requests {
				if client.meta != "" && strings.HasPrefix(rq.method, "resources/") && strings.HasSuffix(rq.method, "subscribe") {
					continue // not in the stateless protocol
				}
				mu.Lock()
				delete(seen, rq.method)
				mu.Unlock()
				resp := answerLine(t, p, s, `{"jsonrpc":"2.0","id":1,"method":"`+rq.method+`","params":`+rq.params+client.meta+`}}`)
				mu.Lock()
				got, ok := seen[rq.method]
				mu.Unlock()
				if !ok {
					t.Errorf("%s did not reach the server: %s", rq.method, resp)
				} else if got != client.want {
					t.Errorf("%s carried the capabilities %s, want %s", rq.method, got, client.want)
				}
			}
		})
	}
}

// answerLine routes one client message of s and returns its response.
func answerLine(t *testing.T, p *Proxy, s *session, msg string) string {
	t.Helper()
	refusal, _, run := p.route.receive(context.Background(), s, []byte(msg), noStream{})
	if refusal != nil {
		return string(refusal)
	}
	if run == nil {
		return ""
	}
	resp, _ := run()
	return string(resp.bytes())
}
