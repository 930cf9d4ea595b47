package filter

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// policyConfig has three servers, four bundles and five agents, among them
// the seed's examples (seed 001: allowed_tools with the `__` auto-admit and
// an excluded destructive sibling; an agent with no bundles; an unknown
// bundle; a bundle excluding a server another bundle grants).
const policyConfig = `
servers:
  filesystem: {command: fs}
  github: {url: "https://gh.example/mcp"}
  memory: {command: mem}
bundles:
  files: {servers: [filesystem]}
  dev: {servers: [filesystem, github]}
  nogh: {servers: [github, memory], exclude: [github]}
  ghost: {servers: [nosuch]}
agents:
  assistant:
    mcp_bundles: [files]
    allowed_tools: [file_read, filesystem__read_file]
    excluded_tools: [filesystem__write_file]
    auto_approve: [filesystem__read_file]
  bare: {}
  typo: {mcp_bundles: [nosuchbundle, ghost]}
  mixed: {mcp_bundles: [dev, nogh]}
  reader: {mcp_bundles: [dev], autonomy: read_only, excluded_tools: ["github__*"]}
  strict: {mcp_bundles: [files], allowed_tools: [tool_search]}
default_agent: assistant
`

var catalog = []Tool{
	{Exposed: "filesystem__read_file", Server: "filesystem", ReadOnly: true},
	{Exposed: "filesystem__write_file", Server: "filesystem"},
	{Exposed: "filesystem__move_file", Server: "filesystem", Filtered: true},
	{Exposed: "github__create_issue", Server: "github"},
	{Exposed: "github__get_issue", Server: "github", ReadOnly: true},
	{Exposed: "memory__read_graph", Server: "memory", ReadOnly: true},
	{Exposed: "memory__create_entities", Server: "memory"},
	{Exposed: "tool_search"},
}

func loadPolicy(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(policyConfig), func(string) (string, bool) { return "/nonexistent-home", true })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// decideAll returns the callable names and, for the rest, the rule.
func decideAll(a *Agent, perCall []string) (allowed []string, rules map[string]Rule) {
	rules = map[string]Rule{}
	for _, tool := range catalog {
		if r := a.Decide(tool, perCall); r == RuleNone {
			allowed = append(allowed, tool.Exposed)
		} else {
			rules[tool.Exposed] = r
		}
	}
	sort.Strings(allowed)
	return allowed, rules
}

func TestPolicyTable(t *testing.T) {
	cfg := loadPolicy(t)
	cases := []struct {
		agent   string
		perCall []string
		allowed []string
		rules   map[string]Rule // a few denials checked by rule
	}{
		{agent: "assistant", allowed: []string{"filesystem__read_file"},
			rules: map[string]Rule{"filesystem__write_file": RuleExcludedTools, "github__create_issue": RuleNotGranted,
				"filesystem__move_file": RuleServerFilter, "tool_search": RuleAllowedTools}},
		{agent: "assistant", perCall: []string{"filesystem__write_file", "tool_search"}, allowed: nil,
			rules: map[string]Rule{"filesystem__read_file": RulePerCallAllowedTools, "filesystem__write_file": RuleExcludedTools,
				"tool_search": RuleAllowedTools}},
		{agent: "bare", allowed: []string{"tool_search"},
			rules: map[string]Rule{"filesystem__read_file": RuleNotGranted, "memory__read_graph": RuleNotGranted}},
		{agent: "typo", allowed: []string{"tool_search"}},
		{agent: "mixed", allowed: []string{"filesystem__read_file", "filesystem__write_file", "memory__create_entities", "memory__read_graph", "tool_search"},
			rules: map[string]Rule{"github__create_issue": RuleNotGranted, "github__get_issue": RuleNotGranted}},
		{agent: "mixed", perCall: []string{"memory__read_graph", "github__get_issue"}, allowed: []string{"memory__read_graph"},
			rules: map[string]Rule{"filesystem__read_file": RulePerCallAllowedTools, "github__get_issue": RuleNotGranted}},
		{agent: "mixed", perCall: []string{}, allowed: nil},
		{agent: "reader", allowed: []string{"filesystem__read_file", "tool_search"},
			rules: map[string]Rule{"filesystem__write_file": RuleReadOnly, "github__get_issue": RuleExcludedTools}},
		{agent: "strict", allowed: []string{"filesystem__read_file", "filesystem__write_file", "tool_search"}},
	}
	for _, c := range cases {
		name := c.agent
		if c.perCall != nil {
			name += "/per-call=" + strings.Join(c.perCall, ",")
		}
		t.Run(name, func(t *testing.T) {
			a, err := Resolve(cfg, c.agent)
			if err != nil {
				t.Fatal(err)
			}
			allowed, rules := decideAll(a, c.perCall)
			if !reflect.DeepEqual(allowed, c.allowed) {
				t.Errorf("allowed = %v, want %v", allowed, c.allowed)
			}
			for tool, want := range c.rules {
				if rules[tool] != want {
					t.Errorf("%s: rule %q, want %q", tool, rules[tool], want)
				}
			}
		})
	}
}

func TestResolveDefaultsAndUnknown(t *testing.T) {
	cfg := loadPolicy(t)
	a, err := Resolve(cfg, "")
	if err != nil || a.Name != "assistant" {
		t.Fatalf("default agent = %v, %v; want assistant", a, err)
	}
	_, err = Resolve(cfg, "ghost")
	if !errors.Is(err, ErrUnknownAgent) || !strings.Contains(err.Error(), "assistant, bare, mixed, reader, strict, typo") {
		t.Fatalf("unknown agent error = %v", err)
	}
	cfg.DefaultAgent = ""
	if _, err := Resolve(cfg, ""); !errors.Is(err, ErrUnknownAgent) {
		t.Fatalf("no default: %v", err)
	}
}

func TestImplicitAgent(t *testing.T) {
	cfg, err := config.Parse([]byte("servers:\n  a: {command: x}\n  b: {command: y, enabled: false}\n"), func(string) (string, bool) { return "/nonexistent-home", true })
	if err != nil {
		t.Fatal(err)
	}
	a, err := Resolve(cfg, "")
	if err != nil || a.Name != "default" || !reflect.DeepEqual(a.Servers(), []string{"a"}) || a.Autonomy() != AutonomyFull {
		t.Fatalf("implicit agent = %+v, %v", a, err)
	}
	if _, err := Resolve(cfg, "other"); !errors.Is(err, ErrUnknownAgent) {
		t.Fatalf("other agent without agents: %v", err)
	}
}

func TestApprovalOrder(t *testing.T) {
	a := &Agent{autonomy: AutonomySupervised, auto: []string{"fs__*", "x"}, ask: []string{"fs__write"}}
	cases := []struct {
		tool   string
		always bool
		want   Approval
	}{
		{"fs__read", false, ApprovalRun},    // auto_approve glob
		{"fs__write", false, ApprovalAsk},   // always_ask beats auto_approve
		{"fs__write", true, ApprovalAsk},    // and beats a session "always"
		{"gh__issue", false, ApprovalAsk},   // nothing matches: ask
		{"gh__issue", true, ApprovalRun},    // approved always earlier
		{"tool_search", false, ApprovalAsk}, // an upstream tool of that name is judged like any other
	}
	for _, c := range cases {
		if got := a.Approval(c.tool, c.always); got != c.want {
			t.Errorf("Approval(%s, %v) = %v, want %v", c.tool, c.always, got, c.want)
		}
	}
	full := &Agent{autonomy: AutonomyFull, ask: []string{"*"}}
	if full.Approval("anything", false) != ApprovalRun {
		t.Error("autonomy full must run without asking")
	}
}

func TestVisibleGroups(t *testing.T) {
	a := &Agent{groups: []config.FilterGroup{{Mode: "always", Tools: []string{"fs__read*"}}, {Mode: "dynamic", Tools: []string{"gh__*"}}}}
	if !a.Visible(Tool{Exposed: "fs__read_file", Server: "fs"}, nil) {
		t.Error("always group must be visible")
	}
	if a.Visible(Tool{Exposed: "gh__issue", Server: "gh"}, nil) {
		t.Error("inactive dynamic group must be hidden")
	}
	if !a.Visible(Tool{Exposed: "gh__issue", Server: "gh"}, func(i int) bool { return i == 1 }) {
		t.Error("active dynamic group must be visible")
	}
	if a.Visible(Tool{Exposed: "fs__write", Server: "fs"}, nil) {
		t.Error("tool matching no group must be hidden")
	}
	if !a.Visible(Tool{Exposed: "tool_search"}, nil) {
		t.Error("the proxy's own tools are always visible")
	}
}

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		p, name string
		want    bool
	}{
		{"a__b", "a__b", true}, {"a__b", "a__bc", false}, {"*", "x", true}, {"a__*", "a__b", true},
		{"*__write", "fs__write", true}, {"g*_log", "git_log", true}, {"ab*ba", "aba", false},
		{"del*", "del/all", true}, {"*/x", "a/b/x", true}, {"a*b*c", "abc", true}, {"a*b*b", "ab", false},
		{"a*b*c", "aXbYbZc", true}, {"*a*", "bab", true}, {"*a*", "bbb", false}, {"**", "", true},
		{"a?", "ab", false}, {"a?", "a?", true},
	}
	for _, c := range cases {
		if got := matchPattern(c.p, c.name); got != c.want {
			t.Errorf("matchPattern(%q, %q) = %v", c.p, c.name, got)
		}
	}
}

// fx1Agents are the agents of the base-matching test, over one server fx1.
const fx1Agents = `
servers:
  fx1: {command: fx}
bundles:
  all: {servers: [fx1]}
agents:
  ex: {mcp_bundles: [all], excluded_tools: [fx1__del_file]}
  exglob: {mcp_bundles: [all], excluded_tools: ["*__del_file"]}
  own: {mcp_bundles: [all], allowed_tools: [fx1__del_file]}
  ask: {mcp_bundles: [all], autonomy: supervised, always_ask: [fx1__del_file], auto_approve: ["*"]}
  auto: {mcp_bundles: [all], autonomy: supervised, auto_approve: [fx1__del_file]}
  grouped: {mcp_bundles: [all], tool_filter_groups: [{mode: always, tools: [fx1__del_file]}]}
`

// fx1Agent resolves one agent of fx1Agents.
func fx1Agent(t *testing.T, name string) *Agent {
	t.Helper()
	cfg, err := config.Parse([]byte(fx1Agents), func(string) (string, bool) { return "/nonexistent-home", true })
	if err != nil {
		t.Fatal(err)
	}
	a, err := Resolve(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRulesMatchBase is issue 12, item 2: a tool renamed with a hash suffix
// because a colliding tool appeared is still matched by every rule that
// names it before the suffix.
func TestRulesMatchBase(t *testing.T) {
	agent := func(name string) *Agent { return fx1Agent(t, name) }
	suffixed := Tool{Exposed: "fx1__del_file_0a1b2c", Base: "fx1__del_file", Server: "fx1"}
	other := Tool{Exposed: "fx1__del_file2", Base: "fx1__del_file2", Server: "fx1"}

	if r := agent("ex").Decide(suffixed, nil); r != RuleExcludedTools {
		t.Errorf("excluded_tools: suffixed tool got rule %q, want excluded_tools", r)
	}
	if r := agent("exglob").Decide(suffixed, nil); r != RuleExcludedTools {
		t.Errorf("excluded_tools glob: suffixed tool got rule %q, want excluded_tools", r)
	}
	if r := agent("ex").Decide(other, nil); r != RuleNone {
		t.Errorf("excluded_tools matched another tool: %q", r)
	}
	if r := agent("own").Decide(suffixed, []string{"fx1__del_file"}); r != RuleNone {
		t.Errorf("per-call list naming the base: rule %q, want none", r)
	}
	if r := agent("own").Decide(other, []string{"fx1__del_file"}); r != RulePerCallAllowedTools {
		t.Errorf("per-call list admitted another tool: rule %q", r)
	}
	if got := agent("ask").ApprovalOf(suffixed, false); got != ApprovalAsk {
		t.Errorf("always_ask naming the base: %v, want ask", got)
	}
	if got := agent("auto").ApprovalOf(suffixed, false); got != ApprovalRun {
		t.Errorf("auto_approve naming the base: %v, want run", got)
	}
	if !agent("grouped").Visible(suffixed, nil) || !agent("grouped").InAlwaysGroup(suffixed) {
		t.Errorf("a group naming the base does not list the suffixed tool")
	}
	if agent("grouped").Visible(other, nil) {
		t.Errorf("a group naming the base lists another tool")
	}
}

// TestRulesMatchDefaultName is docs/agents.md#overrides-and-rate-limits: a tool an override renamed is
// still matched by every rule written for its default name (and by its new
// name), so a rename never moves a tool out of a deny rule.
func TestRulesMatchDefaultName(t *testing.T) {
	agent := func(name string) *Agent { return fx1Agent(t, name) }
	renamed := Tool{Exposed: "remove", Base: "remove", Default: "fx1__del_file", Server: "fx1"}
	byNew := Tool{Exposed: "fx1__del_file2", Base: "fx1__del_file2", Server: "fx1"}

	if r := agent("ex").Decide(renamed, nil); r != RuleExcludedTools {
		t.Errorf("excluded_tools by the default name: rule %q, want excluded_tools", r)
	}
	if r := agent("exglob").Decide(renamed, nil); r != RuleExcludedTools {
		t.Errorf("excluded_tools glob on the default name: rule %q, want excluded_tools", r)
	}
	if r := agent("own").Decide(renamed, []string{"remove"}); r != RuleNone {
		t.Errorf("per-call list naming the new name: rule %q, want none", r)
	}
	if r := agent("own").Decide(renamed, []string{"fx1__del_file"}); r != RuleNone {
		t.Errorf("per-call list naming the default name: rule %q, want none", r)
	}
	if got := agent("ask").ApprovalOf(renamed, false); got != ApprovalAsk {
		t.Errorf("always_ask naming the default name: %v, want ask", got)
	}
	if !agent("grouped").InAlwaysGroup(renamed) {
		t.Errorf("a group naming the default name does not list the renamed tool")
	}
	if !renamed.Matches([]string{"rem*"}) || !renamed.Matches([]string{"fx1__*"}) || renamed.Matches([]string{"fx2__*"}) {
		t.Errorf("Matches: new name, default glob and another server's glob")
	}
	if byNew.Matches([]string{"remove"}) {
		t.Errorf("Matches took another tool for the renamed one")
	}
}
