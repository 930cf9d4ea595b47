package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const supervisedYAML = `
startup_wait: 2s
blobs: {mode: passthrough}
servers:
  fx: {command: fixture}
bundles:
  all: {servers: [fx]}
agents:
  dev: {mcp_bundles: [all], autonomy: supervised}
default_agent: dev
`

// TestApprovalTimesOut: a client that never answers the approval question
// gets a refusal once the timeout passes, and the upstream is never called.
func TestApprovalTimesOut(t *testing.T) {
	fx := connected(`{"name":"write","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		t.Error("the upstream was called without approval")
		return json.RawMessage(`{"content":[]}`), nil
	}
	p := New(Options{Config: parseConfig(t, supervisedYAML), Upstreams: map[string]Upstream{"fx": fx},
		Logger: zerolog.Nop(), ApprovalTimeout: 200 * time.Millisecond})
	p.Refresh()
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	c.recv(`0`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	start := time.Now()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__write","arguments":{"approved":true}}}`)
	resp := c.recv(`1`)
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("refusal after %s, want about 200ms", took)
	}
	if !strings.Contains(resp, `nobody answered the approval request within 200ms`) || !strings.Contains(resp, `"isError":true`) {
		t.Fatalf("response = %s", resp)
	}
	asked := false
	c.mu.Lock()
	for _, l := range c.seen {
		if strings.Contains(l, `"method":"elicitation/create"`) && strings.Contains(l, "fx__write") {
			asked = true
		}
	}
	c.mu.Unlock()
	if !asked {
		t.Fatal("the client was never asked")
	}
}
