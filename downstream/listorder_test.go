package downstream

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Merged lists are in list order: servers in config order, each server's
// items in the server's own order, whatever the order of the names and of
// the servers' connections (here the last server of the config connects
// first), for tools (after the proxy's own), prompts, resources and
// templates alike.
func TestMergedListsInConfigOrder(t *testing.T) {
	ups := map[string]*fakeUpstream{"zeta": {}, "alpha": {}}
	for _, f := range ups {
		f.snap.Store(&upstream.Snapshot{State: upstream.StateConnecting})
	}
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  zeta: {command: fixture}
  alpha: {command: fixture}
`, ups)
	connect := func(f *fakeUpstream, tools []string, names []string) {
		snap := &upstream.Snapshot{State: upstream.StateConnected,
			Capabilities: upstream.Capabilities{Tools: true, Prompts: true, Resources: true}}
		for _, n := range tools {
			snap.Tools = append(snap.Tools, rawTool(`{"name":"`+n+`","inputSchema":{"type":"object"}}`))
		}
		for _, n := range names {
			snap.Prompts = append(snap.Prompts, json.RawMessage(`{"name":"`+n+`"}`))
			snap.Resources = append(snap.Resources, json.RawMessage(`{"uri":"r://`+n+`","name":"`+n+`"}`))
			snap.ResourceTemplates = append(snap.ResourceTemplates, json.RawMessage(`{"uriTemplate":"t://`+n+`/{x}","name":"`+n+`"}`))
		}
		f.snap.Store(snap)
		p.Refresh()
	}
	connect(ups["alpha"], []string{"delta", "charlie"}, []string{"y", "x"})
	connect(ups["zeta"], []string{"bravo", "able"}, []string{"w", "v"})
	s := testState(t, p)
	for _, tt := range []struct {
		method, member, key string
		want                []string
	}{
		{"tools/list", "tools", "name", []string{"mcp_resources", "mcp_prompts", "zeta__bravo", "zeta__able", "alpha__delta", "alpha__charlie"}},
		{"prompts/list", "prompts", "name", []string{"zeta__w", "zeta__v", "alpha__y", "alpha__x"}},
		{"resources/list", "resources", "name", []string{"w", "v", "y", "x"}},
		{"resources/templates/list", "resourceTemplates", "name", []string{"w", "v", "y", "x"}},
	} {
		resp := answerLine(t, p, s, `{"jsonrpc":"2.0","id":1,"method":"`+tt.method+`"}`)
		var out struct {
			Result map[string][]map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(resp), &out); err != nil {
			t.Fatalf("%s: %s: %v", tt.method, resp, err)
		}
		var got []string
		for _, item := range out.Result[tt.member] {
			got = append(got, item[tt.key].(string))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s lists %v, want %v", tt.method, got, tt.want)
		}
	}
}
