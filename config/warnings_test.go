package config

import (
	"strings"
	"testing"
)

func TestWarnings(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{
			name: "implicit agent",
			doc:  "servers:\n  a:\n    command: x\n",
			want: []string{`agents: none defined, so the implicit agent "default" gets every enabled server with autonomy full`},
		},
		{
			name: "agents but no bundles",
			doc:  "servers:\n  a:\n    command: x\nagents:\n  bot: {}\n",
			want: []string{"bundles: servers are configured but no bundle grants them, so no agent reaches any server"},
		},
		{
			name: "unknown names",
			doc: `servers:
  files: {command: x}
  web: {url: "https://example.com"}
bundles:
  b2: {servers: [web, nope], exclude: [filez]}
  b1: {servers: [files]}
agents:
  zed: {mcp_bundles: [b1, missing]}
  amy: {mcp_bundles: [gone, b2]}
`,
			want: []string{
				`bundles.b2.servers[1]: unknown server "nope" grants nothing`,
				`bundles.b2.exclude[0]: unknown server "filez", so this exclude has no effect`,
				`agents.amy.mcp_bundles[0]: unknown bundle "gone" grants nothing`,
				`agents.zed.mcp_bundles[1]: unknown bundle "missing" grants nothing`,
			},
		},
		{
			name: "metrics open to the network without tokens",
			doc:  "servers:\n  a: {command: x}\nbundles:\n  b: {servers: [a]}\nagents:\n  bot: {mcp_bundles: [b]}\nmetrics: {listen: \"0.0.0.0:9464\"}\n",
			want: []string{`metrics.tokens: metrics.listen "0.0.0.0:9464" is not a loopback address and no tokens are set, so anyone who reaches it can read the metrics and the status page (whose actions need its token)`},
		},
		{
			name: "metrics open to the network with tokens",
			doc:  "servers:\n  a: {command: x}\nbundles:\n  b: {servers: [a]}\nagents:\n  bot: {mcp_bundles: [b]}\nmetrics: {listen: \":9464\", tokens: [t]}\n",
			want: nil,
		},
		{
			name: "an override marks a tool read-only",
			doc: `servers:
  gh:
    command: x
    tools:
      overrides:
        list_issues: {annotations: {readOnlyHint: true}}
        delete_repo: {annotations: {readOnlyHint: false}}
bundles:
  b: {servers: [gh]}
agents:
  bot: {mcp_bundles: [b]}
`,
			want: []string{`servers.gh.tools.overrides.list_issues.annotations.readOnlyHint: marks the tool read-only, so agents with autonomy read_only may call it`},
		},
		{
			name: "clean",
			doc:  "servers:\n  a: {command: x}\nbundles:\n  b: {servers: [a]}\nagents:\n  bot: {mcp_bundles: [b]}\n",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := Parse([]byte(tt.doc), testEnv())
			if cfg == nil {
				t.Fatal("no config")
			}
			got := cfg.Warnings()
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Warnings() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
