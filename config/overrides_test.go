package config

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestOverridesAndLimitsParse is a valid config with every key of docs/agents.md#overrides-and-rate-limits:
// the values arrive as written, burst defaults to per_minute, and the
// free-form values encode as the JSON the proxy sends.
func TestOverridesAndLimitsParse(t *testing.T) {
	doc := `servers:
  github:
    command: gh-mcp
    limits: {per_minute: 120, max_concurrent: 4}
    tools:
      overrides:
        create_issue:
          name: new_issue
          title: New issue
          description: Opens an issue in mcp-proxy/mcp-proxy.
          annotations: {destructiveHint: false, x-team: {owner: platform}}
          arguments: {owner: mcp-proxy, repo: "mcp-proxy", labels: [triage, 2], draft: null}
agents:
  bot:
    limits:
      - {tools: ["github__*"], per_minute: 30}
      - {tools: [new_issue], per_minute: 6, burst: 2}
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Servers["github"]
	if s.Limits != (ServerLimits{PerMinute: 120, MaxConcurrent: 4}) {
		t.Errorf("server limits = %+v", s.Limits)
	}
	o := s.Tools.Overrides["create_issue"]
	if o == nil || o.Name != "new_issue" || o.Title != "New issue" || o.Description != "Opens an issue in mcp-proxy/mcp-proxy." {
		t.Fatalf("override = %+v", o)
	}
	for k, want := range map[string]string{"owner": `"mcp-proxy"`, "labels": `["triage",2]`, "draft": `null`} {
		got, err := JSONValue(o.Arguments[k])
		if err != nil || string(got) != want {
			t.Errorf("arguments.%s = %s, %v; want %s", k, got, err, want)
		}
	}
	if got, _ := JSONValue(o.Annotations["x-team"]); string(got) != `{"owner":"platform"}` {
		t.Errorf("annotations.x-team = %s", got)
	}
	limits := cfg.Agents["bot"].Limits
	if len(limits) != 2 || limits[0].Burst != 30 || limits[1].Burst != 2 || limits[1].PerMinute != 6 {
		t.Errorf("agent limits = %+v, want burst 30 (its per_minute) and 2", limits)
	}
	if w := strings.Join(cfg.Warnings(), "\n"); strings.Contains(w, "readOnlyHint") {
		t.Errorf("warnings name readOnlyHint without one: %s", w)
	}
}

func TestJSONValue(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string // "" means an error
	}{
		{"null", nil, `null`},
		{"string without HTML escaping", "<a & b>", `"<a & b>"`},
		{"integers", []any{1, int64(-2), uint64(18446744073709551615)}, `[1,-2,18446744073709551615]`},
		{"float", 2.5, `2.5`},
		{"sorted keys", map[string]any{"b": true, "a": map[any]any{"z": 1}}, `{"a":{"z":1},"b":true}`},
		{"non-string key", map[any]any{1: "x"}, ""},
		{"NaN", math.NaN(), ""},
		{"infinity", math.Inf(-1), ""},
		{"timestamp", time.Unix(0, 0), ""},
		{"unknown type", struct{}{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JSONValue(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("JSONValue = %s, want an error", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("JSONValue = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
	deep := any("x")
	for range maxJSONDepth + 1 {
		deep = []any{deep}
	}
	if _, err := JSONValue(deep); err == nil {
		t.Error("a value nested past the bound encoded")
	}
}
