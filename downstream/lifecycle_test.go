package downstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The capabilities a client is offered are the union over the servers its
// agent is granted (a server not connected counts as offering everything
// it might), in the client's protocol version: every version from
// 2024-11-05 to 2026-07-28 is served whatever the servers speak, and
// completions, which 2024-11-05 does not have, is not offered at it.
func TestCapabilitiesOffered(t *testing.T) {
	withCaps := func(c upstream.Capabilities) *fakeUpstream {
		f := connected(`{"name":"x","inputSchema":{"type":"object"}}`)
		snap := *f.Snapshot()
		snap.Capabilities = c
		f.snap.Store(&snap)
		return f
	}
	down := &fakeUpstream{}
	down.snap.Store(&upstream.Snapshot{State: upstream.StateFailed})
	p := newProxy(t, `
blobs: {mode: passthrough}
servers:
  pr: {command: fixture}
  rs: {command: fixture}
  rsoff: {command: fixture, tools: {resources: false}}
  dn: {command: fixture}
  tk: {command: fixture}
bundles:
  prompts: {servers: [pr]}
  resources: {servers: [rs]}
  both: {servers: [pr, rs]}
  resoff: {servers: [rsoff]}
  down: {servers: [dn]}
  tasks: {servers: [tk, pr]}
agents:
  p: {mcp_bundles: [prompts]}
  r: {mcp_bundles: [resources]}
  pr: {mcp_bundles: [both]}
  off: {mcp_bundles: [resoff]}
  dn: {mcp_bundles: [down]}
  tk: {mcp_bundles: [tasks]}
default_agent: pr
`, map[string]*fakeUpstream{
		"pr":    withCaps(upstream.Capabilities{Tools: true, Prompts: true, PromptsListChanged: true, Completions: true, Logging: true}),
		"rs":    withCaps(upstream.Capabilities{Tools: true, Resources: true, ResourcesSubscribe: true}),
		"rsoff": withCaps(upstream.Capabilities{Tools: true, Resources: true, ResourcesSubscribe: true}),
		"dn":    down,
		"tk":    withCaps(upstream.Capabilities{Tools: true, Tasks: upstream.TaskCapabilities{ToolCalls: true, Cancel: true}}),
	})
	const (
		all        = `{"logging":{},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true},"completions":{}}`
		all2024    = `{"logging":{},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true}}`
		prompts    = `{"logging":{},"prompts":{"listChanged":true},"tools":{"listChanged":true},"completions":{}}`
		prompts24  = `{"logging":{},"prompts":{"listChanged":true},"tools":{"listChanged":true}}`
		resources  = `{"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true}}`
		toolsAlone = `{"tools":{"listChanged":true}}`
		// A server not connected may come with tasks too.
		allTasks = `{"logging":{},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true},"completions":{},` +
			`"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`
		promptsTasks = `{"logging":{},"prompts":{"listChanged":true},"tools":{"listChanged":true},"completions":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}}`
	)
	for _, tt := range []struct {
		agent, version, want string
	}{
		{"pr", "2025-11-25", all},
		{"pr", "2025-06-18", all},
		{"pr", "2025-03-26", all},
		{"pr", "2024-11-05", all2024},
		{"pr", "2026-07-28", all},
		{"p", "2025-11-25", prompts},
		{"p", "2024-11-05", prompts24},
		{"p", "2026-07-28", prompts},
		{"r", "2025-11-25", resources},
		{"r", "2026-07-28", resources},
		{"off", "2025-11-25", toolsAlone},
		{"dn", "2025-11-25", allTasks},
		{"dn", "2025-06-18", all},
		{"dn", "2024-11-05", all2024},
		{"dn", "2026-07-28", all},
		// Tasks as the granted servers declare them, to the era that has
		// them (MCP 2025-11-25) only.
		{"tk", "2025-11-25", promptsTasks},
		{"tk", "2025-06-18", prompts},
		{"tk", "2026-07-28", prompts},
	} {
		s := agentSession(t, p, tt.agent)
		var msg string
		if tt.version == modernVersion {
			msg = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` + modernMeta + `}}}`
		} else {
			msg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + tt.version + `","capabilities":{}}}`
		}
		var res struct {
			Result struct {
				ProtocolVersion   string          `json:"protocolVersion"`
				SupportedVersions []string        `json:"supportedVersions"`
				Capabilities      json.RawMessage `json:"capabilities"`
			} `json:"result"`
		}
		got := answerLine(t, p, s, msg)
		if err := json.Unmarshal([]byte(got), &res); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if tt.version != modernVersion && res.Result.ProtocolVersion != tt.version {
			t.Errorf("agent %s asking %s was answered version %s", tt.agent, tt.version, res.Result.ProtocolVersion)
		}
		if tt.version == modernVersion && strings.Join(res.Result.SupportedVersions, " ") != strings.Join(protocolVersions, " ") {
			t.Errorf("agent %s: discover offers %v", tt.agent, res.Result.SupportedVersions)
		}
		if string(res.Result.Capabilities) != tt.want {
			t.Errorf("agent %s at %s is offered\n%s\nwant\n%s", tt.agent, tt.version, res.Result.Capabilities, tt.want)
		}
		s.close()
	}
}
