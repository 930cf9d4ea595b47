package downstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/upstream"
	"github.com/rs/zerolog"
)

// TestUpstreamCallCarriesClientCaps: a tool call reaches the upstream with
// the capabilities of the client that sent it, of those the proxy relays
// (an upstream of the 2026-07-28 era declares them in the request's _meta).
func TestUpstreamCallCarriesClientCaps(t *testing.T) {
	for _, tc := range []struct{ name, caps, want string }{
		{"none", `{}`, `{}`},
		{"sampling and roots", `{"sampling":{},"roots":{"listChanged":true},"experimental":{}}`, `{"sampling":{}}`},
		{"elicitation named without modes", `{"elicitation":{}}`, `{"elicitation":{"form":{}}}`},
		{"elicitation url", `{"elicitation":{"url":{}},"sampling":{}}`, `{"elicitation":{"url":{}},"sampling":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := connected(`{"name":"echo","inputSchema":{"type":"object"}}`)
			got := make(chan string, 1)
			fx.RequestFn = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
				caps, ok := upstream.ClientCapabilities(ctx)
				if !ok {
					caps = json.RawMessage("(none)")
				}
				got <- string(caps)
				return json.RawMessage(`{"content":[]}`), nil
			}
			p := New(Options{Config: parseConfig(t, oneServerYAML), Upstreams: map[string]Upstream{"fx": fx}, Logger: zerolog.Nop()})
			p.Refresh()
			c := startStdio(t, p)
			c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + tc.caps + `,"clientInfo":{"name":"t","version":"1"}}}`)
			c.recv(`0`)
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
			c.recv(`1`)
			if caps := <-got; caps != tc.want {
				t.Errorf("the upstream was told %s, want %s", caps, tc.want)
			}
		})
	}
}

// TestUpstreamCaps: the capabilities an upstream of the 2026-07-28 era is
// told for a client name only what that client can answer.
func TestUpstreamCaps(t *testing.T) {
	for _, tc := range []struct {
		caps clientCaps
		want string
	}{
		{clientCaps{}, `{}`},
		{clientCaps{sampling: true}, `{"sampling":{}}`},
		{clientCaps{elicitation: true}, `{"elicitation":{"form":{}}}`},
		{clientCaps{elicitationURL: true}, `{"elicitation":{"url":{}}}`},
		{clientCaps{sampling: true, elicitation: true, elicitationURL: true}, `{"elicitation":{"form":{},"url":{}},"sampling":{}}`},
	} {
		if got := string(tc.caps.upstreamCaps()); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.caps, got, tc.want)
		}
	}
}
