package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// TestPinnedInstructions: pinned resources are read when a session starts,
// each checked as <server>__<uri> against the agent's excluded_tools, and
// rendered as untrusted text under "## Pinned MCP Resources".
func TestPinnedInstructions(t *testing.T) {
	up := &fakeUpstream{}
	up.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true}})
	up.RequestFn = func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(params, &p)
		return json.RawMessage(`{"contents":[{"uri":"` + p.URI + `","mimeType":"text/plain","text":"notes of ` + p.URI + ` ghp_0123456789abcdefghijklmnopqrstuvwxyz"}]}`), nil
	}
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  docs:
    command: docs
    pinned_resources: ["file:///a.txt", "file:///secret.txt"]
bundles:
  all: {servers: [docs]}
agents:
  dev: {mcp_bundles: [all], excluded_tools: ["docs__file:///secret.txt"]}
default_agent: dev
`, map[string]*fakeUpstream{"docs": up})
	st := testState(t, p)
	got := p.own.pinnedInstructions(context.Background(), &request{sess: st})
	want := "## Pinned MCP Resources\n\n" +
		`<mcp-resource server="docs" uri="file:///a.txt" mime="text/plain" trust="untrusted-external">` + "\n" +
		"notes of file:///a.txt [REDACTED]\n</mcp-resource>\n"
	if got != want {
		t.Fatalf("pinned instructions =\n%q\nwant\n%q", got, want)
	}
	if calls := up.requests(); len(calls) != 1 || !strings.Contains(calls[0].Params, "a.txt") {
		t.Fatalf("the excluded pinned resource was read: %+v", calls)
	}
}
