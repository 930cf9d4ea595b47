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

// Past maxApprovalStates open questions the oldest goes first; a client
// past its share forgets its own oldest questions, never another
// client's; expired states make room before anything else goes.
func TestApprovalStatesEviction(t *testing.T) {
	expires := time.Now().Add(time.Hour)
	keyOf := func(client int) approvalKey {
		return approvalKey{agent: "dev", client: principal{token: client + 1}, tool: "fx__write", args: "d"}
	}
	good := func(a *approvalStates, state string, client int) bool {
		return a.take(state, keyOf(client), time.Now()) == nil
	}

	t.Run("oldest first", func(t *testing.T) {
		var a approvalStates
		const clients = maxApprovalStates / (maxApprovalStatesPerClient / 2) // each at half its share
		var first, second string
		for i := range maxApprovalStates {
			s := a.issue(keyOf(i%clients), expires)
			switch i {
			case 0:
				first = s
			case 1:
				second = s
			}
		}
		a.issue(keyOf(clients), expires) // one more, from a new client
		if good(&a, first, 0) {
			t.Error("the oldest state is still good after one state too many")
		}
		if !good(&a, second, 1) {
			t.Error("the second oldest state went; only the oldest should")
		}
	})

	t.Run("a client's share", func(t *testing.T) {
		var a approvalStates
		var victims []string
		for range 10 {
			victims = append(victims, a.issue(keyOf(0), expires))
		}
		var flood []string
		for range 2 * maxApprovalStates {
			flood = append(flood, a.issue(keyOf(1), expires))
		}
		for i, s := range victims {
			if !good(&a, s, 0) {
				t.Fatalf("another client's flood pushed out question %d of client 0", i)
			}
		}
		if good(&a, flood[len(flood)-maxApprovalStatesPerClient-1], 1) {
			t.Error("the flooding client keeps more than its share")
		}
		if !good(&a, flood[len(flood)-maxApprovalStatesPerClient], 1) || !good(&a, flood[len(flood)-1], 1) {
			t.Error("the flooding client lost questions within its share")
		}
	})

	t.Run("expired first", func(t *testing.T) {
		var a approvalStates
		past := time.Now().Add(-time.Second)
		a.issue(keyOf(0), past)
		live := a.issue(keyOf(0), expires)
		a.issue(keyOf(1), expires)
		if n := len(a.m); n != 2 {
			t.Errorf("%d states kept; the expired one should have gone", n)
		}
		if !good(&a, live, 0) {
			t.Error("a live state went with the expired one")
		}
		if len(a.m) != 1 || a.all.Len() != 1 || len(a.clients) != 1 {
			t.Errorf("after take: %d states, %d in order, %d clients; want 1, 1, 1", len(a.m), a.all.Len(), len(a.clients))
		}
	})
}

// withoutApproved drops a top-level "approved" however its key is spelled
// (an escape decodes to the same name) and leaves everything else as it is.
func TestWithoutApproved(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{"a":"line\nbreak"}`, `{"a":"line\nbreak"}`},
		{`{"a":1,"approved":true}`, `{"a":1}`},
		{`{"appr\u006fved":true,"a":1}`, `{"a":1}`},
		{`{"a":{"approved":true}}`, `{"a":{"approved":true}}`},
		{`{"a":"approved"}`, `{"a":"approved"}`},
		{`null`, `null`},
	} {
		in := json.RawMessage(tt.in)
		got := withoutApproved(in)
		if string(got) != tt.want {
			t.Errorf("withoutApproved(%s) = %s, want %s", tt.in, got, tt.want)
		}
		if tt.in == tt.want && !sameBytes(got, in) {
			t.Errorf("withoutApproved(%s) copied arguments it does not change", tt.in)
		}
	}
}
