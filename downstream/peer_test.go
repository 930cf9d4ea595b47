package downstream

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// No request of the proxy reaches a session-based client before its
// notifications/initialized (the lifecycle's rule), whichever path asks:
// a server's roots/list no call owns, a server's elicitation during the
// client's call, an approval question. Each waits and goes once the
// client has said it is initialized; the answer then gets through.
func TestNoRequestToTheClientBeforeInitialized(t *testing.T) {
	const caps = `{"roots":{},"elicitation":{}}`
	for _, tt := range []struct {
		name   string
		yaml   string
		method string // of the proxy's request to the client
		// start makes the proxy want to ask the client; wait returns what
		// the one asking got back.
		start        func(t *testing.T, p *Proxy, c *stdioClient) (wait func() string)
		answer, want string
	}{
		{
			name: "roots/list no call owns", yaml: oneServerYAML, method: "roots/list",
			start: func(t *testing.T, p *Proxy, c *stdioClient) func() string {
				done := make(chan string, 1)
				go func() {
					res, err := p.OnUpstreamRequest(context.Background(), "fx", "roots/list", nil)
					if err != nil {
						done <- err.Error()
						return
					}
					done <- string(res)
				}()
				return func() string { return <-done }
			},
			answer: `{"roots":[{"uri":"file:///home/me"}]}`, want: `{"roots":[{"uri":"file:///home/me"}]}`,
		},
		{
			name: "elicitation during a call", yaml: oneServerYAML, method: "elicitation/create",
			start: func(t *testing.T, p *Proxy, c *stdioClient) func() string {
				c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
				return func() string { return c.recv(`1`) }
			},
			answer: `{"action":"accept","content":{"ok":true}}`,
			want:   `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"action\":\"accept\",\"content\":{\"ok\":true}}"}]}}`,
		},
		{
			name: "approval question", yaml: supervisedYAML, method: "elicitation/create",
			start: func(t *testing.T, p *Proxy, c *stdioClient) func() string {
				c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
				return func() string { return c.recv(`1`) }
			},
			answer: `{"action":"accept","content":{"decision":"approve"}}`,
			want:   `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ran"}]}}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := connected(echoTool)
			var p *Proxy
			fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
				if tt.yaml == supervisedYAML {
					return json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`), nil
				}
				res, err := p.OnUpstreamRequest(ctx, "fx", "elicitation/create", json.RawMessage(`{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}`))
				if err != nil {
					return nil, err
				}
				b, _ := json.Marshal(string(res))
				return json.RawMessage(`{"content":[{"type":"text","text":` + string(b) + `}]}`), nil
			}
			p = newProxy(t, tt.yaml, map[string]*fakeUpstream{"fx": fx})
			c := startStdio(t, p)
			c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `}}`)
			c.recv(`0`)
			wait := tt.start(t, p, c)
			select {
			case l := <-c.lines:
				t.Fatalf("before notifications/initialized the proxy sent %s", l)
			case <-time.After(200 * time.Millisecond):
			}
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			ask := c.next()
			if !strings.Contains(ask, `"method":"`+tt.method+`"`) {
				t.Fatalf("after notifications/initialized the proxy sent %s; want its %s request", ask, tt.method)
			}
			id := regexp.MustCompile(`"id":(\d+)`).FindStringSubmatch(ask)[1]
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":` + tt.answer + `}`)
			if got := wait(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
