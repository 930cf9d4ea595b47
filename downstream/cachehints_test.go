package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// A 2026-07-28 client's merged list carries the smallest remaining TTL of
// the granted servers' lists and is public only when every one of them
// is and every client gets the same list (no agents); a server that gave
// no hint makes the list stale at once and private; a server the agent is
// not granted does not count. A resources/read result keeps the server's
// hint, within the same rule for its scope. Session-era clients get none.
func TestCacheHintsMerged(t *testing.T) {
	hint := func(ttl time.Duration, public bool) upstream.CacheHint {
		return upstream.CacheHint{Given: true, TTL: ttl, Public: public, Fetched: time.Now()}
	}
	server := func(tools, prompts upstream.CacheHint) *fakeUpstream {
		f := connected(`{"name":"t","inputSchema":{"type":"object"}}`)
		snap := *f.Snapshot()
		snap.Capabilities = upstream.Capabilities{Tools: true, Prompts: true, Resources: true}
		snap.Prompts = []json.RawMessage{json.RawMessage(`{"name":"p"}`)}
		snap.Resources = []json.RawMessage{json.RawMessage(`{"uri":"r://1","name":"r"}`)}
		snap.ToolsHint, snap.PromptsHint = tools, prompts
		f.snap.Store(&snap)
		f.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"contents":[],"ttlMs":5000,"cacheScope":"public"}`), nil
		}
		return f
	}
	const twoServers = "blobs: {mode: passthrough}\nservers:\n  a: {command: fixture}\n  b: {command: fixture}\n"
	const agents = twoServers + "bundles:\n  justa: {servers: [a]}\n  both: {servers: [a, b]}\n" +
		"agents:\n  onlya: {mcp_bundles: [justa]}\n  all: {mcp_bundles: [both]}\ndefault_agent: all\n"
	type want struct {
		minMs, maxMs int64
		scope        string
	}
	for _, tt := range []struct {
		name, yaml, agent, method string
		a, b                      upstream.CacheHint
		want                      want
	}{
		{"both public, no agents", twoServers, "", "tools/list", hint(time.Minute, true), hint(30*time.Second, true), want{1, 30000, "public"}},
		{"one private", twoServers, "", "tools/list", hint(time.Minute, true), hint(30*time.Second, false), want{1, 30000, "private"}},
		{"one without a hint", twoServers, "", "tools/list", hint(time.Minute, true), upstream.CacheHint{}, want{0, 0, "private"}},
		{"agents make it private", agents, "all", "tools/list", hint(time.Minute, true), hint(30*time.Second, true), want{1, 30000, "private"}},
		{"an ungranted server does not count", agents, "onlya", "tools/list", hint(time.Minute, true), hint(time.Second, true), want{30001, 60000, "private"}},
		{"prompts", twoServers, "", "prompts/list", hint(time.Minute, true), hint(20*time.Second, true), want{1, 20000, "public"}},
		{"resources/read keeps the server's", twoServers, "", "resources/read", upstream.CacheHint{}, upstream.CacheHint{}, want{5000, 5000, "public"}},
		{"resources/read with agents", agents, "all", "resources/read", upstream.CacheHint{}, upstream.CacheHint{}, want{5000, 5000, "private"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newProxy(t, tt.yaml, map[string]*fakeUpstream{"a": server(tt.a, tt.a), "b": server(tt.b, tt.b)})
			s := agentSession(t, p, tt.agent)
			params := `{"_meta":{` + modernMeta + `}}`
			if tt.method == "resources/read" {
				params = `{"uri":"a+r://1","_meta":{` + modernMeta + `}}`
			}
			resp := answerLine(t, p, s, `{"jsonrpc":"2.0","id":1,"method":"`+tt.method+`","params":`+params+`}`)
			var out struct {
				Result struct {
					TTL   *int64 `json:"ttlMs"`
					Scope string `json:"cacheScope"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(resp), &out); err != nil || out.Result.TTL == nil {
				t.Fatalf("%s: %v", resp, err)
			}
			if ttl := *out.Result.TTL; ttl < tt.want.minMs || ttl > tt.want.maxMs || out.Result.Scope != tt.want.scope {
				t.Errorf("ttlMs %d, cacheScope %q; want %d..%d, %q", ttl, out.Result.Scope, tt.want.minMs, tt.want.maxMs, tt.want.scope)
			}
			// A session-era client's list has no hints.
			s2 := agentSession(t, p, tt.agent)
			answerLine(t, p, s2, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
			if tt.method != "resources/read" {
				if resp := answerLine(t, p, s2, `{"jsonrpc":"2.0","id":1,"method":"`+tt.method+`"}`); strings.Contains(resp, "ttlMs") {
					t.Errorf("a 2025-11-25 client's %s carries hints: %s", tt.method, resp)
				}
			}
		})
	}
}

// staleCounting is an upstream that counts RefreshStale.
type staleCounting struct {
	*fakeUpstream
	n int
}

func (s *staleCounting) RefreshStale() { s.n++ }

// Every list a client asks for first has the granted servers read again
// the lists whose hints have passed (the proxy's own copies honour the
// servers' TTLs); a server the agent is not granted is left alone.
func TestListsRefreshStaleUpstreams(t *testing.T) {
	a, b := &staleCounting{fakeUpstream: connected(`{"name":"t"}`)}, &staleCounting{fakeUpstream: connected(`{"name":"u"}`)}
	p := New(Options{Config: parseConfig(t, "blobs: {mode: passthrough}\nservers:\n  a: {command: fixture}\n  b: {command: fixture}\n"+
		"bundles:\n  justa: {servers: [a]}\nagents:\n  onlya: {mcp_bundles: [justa]}\ndefault_agent: onlya\n"),
		Upstreams: map[string]Upstream{"a": a, "b": b}, Logger: zerolog.Nop(), Version: "test"})
	p.Refresh()
	s := testState(t, p)
	for i, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		answerLine(t, p, s, `{"jsonrpc":"2.0","id":1,"method":"`+m+`"}`)
		if a.n != i+1 || b.n != 0 {
			t.Fatalf("after %s: the granted server was asked %d times, the other %d; want %d and 0", m, a.n, b.n, i+1)
		}
	}
}
