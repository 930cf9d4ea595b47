package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/store"
)

// giveBackYAML: agent bot may make 2 calls a minute to any tool; server fx
// takes 1 a minute, fy has no limit of its own.
const giveBackYAML = `
startup_wait: 2s
blobs: {mode: passthrough}
servers:
  fx: {command: fixture, timeout: 5s, limits: {per_minute: 1}}
  fy: {command: fixture, timeout: 5s}
bundles:
  all: {servers: [fx, fy]}
agents:
  bot:
    mcp_bundles: [all]
    limits: [{tools: ["*"], per_minute: 2, burst: 2}]
default_agent: bot
`

// storeProxy is a proxy over yaml with the store st (nil: memory), whose
// upstreams fx and fy each have a tool alpha that answers "ok".
func storeProxy(t *testing.T, yaml string, st *store.Store) *Proxy {
	t.Helper()
	ok := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	fx, fy := connected(`{"name":"alpha","inputSchema":{"type":"object"}}`), connected(`{"name":"alpha","inputSchema":{"type":"object"}}`)
	fx.RequestFn, fy.RequestFn = ok, ok
	p := New(Options{Config: parseConfig(t, yaml), Upstreams: map[string]Upstream{"fx": fx, "fy": fy},
		Logger: zerolog.Nop(), Version: "test", Store: st})
	p.Refresh()
	return p
}

// checkGiveBack: a call the server's limit refuses gives back the token the
// agent's limit took, so the agent's second call of the minute still
// passes, and its third does not.
func checkGiveBack(t *testing.T, p *Proxy) {
	t.Helper()
	if text, isErr := callText(t, p, "bot", "fx__alpha"); isErr {
		t.Fatalf("1st call: %s", text)
	}
	text, isErr := callText(t, p, "bot", "fx__alpha")
	if !isErr || !strings.HasPrefix(text, "tool 'fx__alpha' is denied by rate_limited: server 'fx' takes 1 call a minute; retry in ") {
		t.Fatalf("2nd call = %q (isError %v), want the server's refusal", text, isErr)
	}
	if text, isErr := callText(t, p, "bot", "fy__alpha"); isErr {
		t.Fatalf("3rd call, after the server refused the 2nd: %s (the agent's token was not given back)", text)
	}
	text, isErr = callText(t, p, "bot", "fy__alpha")
	if !isErr || !strings.HasPrefix(text, "tool 'fy__alpha' is denied by rate_limited: agent 'bot' may make 2 calls a minute (burst 2) to *; retry in ") {
		t.Fatalf("4th call = %q (isError %v), want the agent's refusal", text, isErr)
	}
}

// TestRefusalGivesBackOtherLimits: with the memory store (its clock
// frozen, so nothing refills).
func TestRefusalGivesBackOtherLimits(t *testing.T) {
	p := storeProxy(t, giveBackYAML, nil)
	clk := &clock{now: p.now()}
	p.now = clk.Now
	p.cur.Load().limits = buildLimits(p.gen().cfg, nil, clk.Now(), nil)
	checkGiveBack(t, p)
}
