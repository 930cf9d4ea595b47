package filter

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// Rule names why a tool is denied; the values are those of docs/agents.md#the-policy-rules, used in denial
// texts and as the metric label `rule`.
type Rule string

// The rules of docs/agents.md#the-policy-rules, in the order they are applied.
const (
	RuleNone                Rule = ""
	RuleNotGranted          Rule = "not_granted"
	RuleServerFilter        Rule = "server_filter"
	RuleExcludedTools       Rule = "excluded_tools"
	RuleAllowedTools        Rule = "allowed_tools"
	RulePerCallAllowedTools Rule = "per_call_allowed_tools"
	RuleReadOnly            Rule = "read_only"
	// RuleQuarantined and RuleRateLimited are not decided here: tool
	// integrity (docs/security.md#tool-integrity) and the rate limits (docs/agents.md#overrides-and-rate-limits) refuse calls
	// under these names in the call path.
	RuleQuarantined Rule = "quarantined"
	RuleRateLimited Rule = "rate_limited"
)

// Hidden reports whether the rule hides a tool completely: calling it is the
// JSON-RPC error `unknown tool`, so the agent learns nothing of what it was
// not granted. The other rules answer a call with a result naming the rule.
func (r Rule) Hidden() bool { return r == RuleNotGranted || r == RuleServerFilter }

// Autonomy levels of docs/agents.md#agents-bundles-and-policy.
const (
	AutonomyFull       = "full"
	AutonomySupervised = "supervised"
	AutonomyReadOnly   = "read_only"
)

// ErrUnknownAgent is returned for an agent that is asked for but not defined.
var ErrUnknownAgent = errors.New("unknown agent")

// Tool is what the policy needs to know about one exposed tool.
type Tool struct {
	Exposed string
	// Base is the exposed name before any hash suffix a name collision
	// added (namespace.Entry.Base, downstream.ToolEntry.Base); "" means
	// Exposed. Every rule that matches names matches Exposed or Base, so a
	// suffix never moves a tool out of a rule (docs/agents.md#names).
	Base string
	// Default is, for a tool an override renamed (docs/agents.md#overrides-and-rate-limits), the name it
	// would have been exposed under without the rename
	// (namespace.Entry.Default); "" otherwise. Rules match it too, so a
	// rename never moves a tool out of a rule written for its old name.
	Default string
	// Server is the configured server; "" for the proxy's own tools.
	Server string
	// ReadOnly is the upstream's annotations.readOnlyHint.
	ReadOnly bool
	// Filtered is true when the server's own tools.include/exclude drop it.
	Filtered bool
}

// Own reports whether the tool is one of the proxy's own (tool_search,
// call_tool, mcp_resources, mcp_prompts).
func (t Tool) Own() bool { return t.Server == "" }

// matches reports whether a pattern of list matches the tool's exposed
// name, its base or its default name.
func (t Tool) matches(list []string) bool {
	return matchList(list, t.Exposed) || t.Base != "" && t.Base != t.Exposed && matchList(list, t.Base) ||
		t.Default != "" && matchList(list, t.Default)
}

// Matches reports whether any pattern of list (exact names, or globs with
// '*' as in the policy's lists) matches the tool's exposed name, its base
// or its default name: the rule every name list of the config follows.
func (t Tool) Matches(list []string) bool { return t.matches(list) }

// listed reports whether list holds the tool's exposed name, its base or
// its default name exactly.
func (t Tool) listed(list []string) bool {
	return slices.Contains(list, t.Exposed) || t.Base != "" && t.Base != t.Exposed && slices.Contains(list, t.Base) ||
		t.Default != "" && slices.Contains(list, t.Default)
}

// Agent is one agent's resolved grants and settings. It is immutable: a
// session resolves its agent once, when it starts, so that a config reload
// applies to new sessions only (docs/operations.md#shutdown-and-reload, docs/agents.md#agents-bundles-and-policy).
type Agent struct {
	Name string
	// Deferred is true when the agent runs in deferred mode (docs/deferred-loading.md).
	Deferred bool
	// CallTool is true when deferred mode lists call_tool.
	CallTool bool
	granted  map[string]bool
	excluded []string
	allowed  []string
	autonomy string
	auto     []string
	ask      []string
	groups   []config.FilterGroup
}

// Resolve returns the agent named name (the default agent when name is
// empty). Without `agents` in the config there is one implicit agent,
// `default`, granted every enabled server with autonomy full.
func Resolve(cfg *config.Config, name string) (*Agent, error) {
	if !cfg.HasAgents() {
		if name != "" && name != config.ImplicitAgent {
			return nil, fmt.Errorf("%w %q: no agents are configured; the implicit agent is %q", ErrUnknownAgent, name, config.ImplicitAgent)
		}
		a := &Agent{Name: config.ImplicitAgent, granted: map[string]bool{}, autonomy: AutonomyFull,
			Deferred: cfg.DeferredFor(nil), CallTool: cfg.CallToolListed()}
		for n, s := range cfg.Servers {
			if s.IsEnabled() {
				a.granted[n] = true
			}
		}
		return a, nil
	}
	if name == "" {
		name = cfg.DefaultAgent
	}
	if name == "" {
		return nil, fmt.Errorf("%w: no agent named and no default_agent set; agents: %s", ErrUnknownAgent, strings.Join(cfg.AgentNames(), ", "))
	}
	ac := cfg.Agents[name]
	if ac == nil {
		return nil, fmt.Errorf("%w %q; agents: %s", ErrUnknownAgent, name, strings.Join(cfg.AgentNames(), ", "))
	}
	a := &Agent{
		Name: name, granted: Grants(cfg, ac), excluded: ac.ExcludedTools, allowed: ac.AllowedTools,
		autonomy: ac.Autonomy, auto: ac.AutoApprove, ask: ac.AlwaysAsk, groups: ac.ToolFilterGroups,
		Deferred: cfg.DeferredFor(ac), CallTool: cfg.CallToolListed(),
	}
	if a.autonomy == "" {
		a.autonomy = AutonomyFull
	}
	return a, nil
}

// Grants resolves an agent's servers (seed 001): the union of the servers of
// all its bundles, minus every name any of those bundles excludes (deny
// wins). Unknown bundle aliases and unknown or disabled servers grant
// nothing; an agent with no bundles reaches no server.
func Grants(cfg *config.Config, a *config.Agent) map[string]bool {
	granted := map[string]bool{}
	denied := map[string]bool{}
	for _, alias := range a.MCPBundles {
		b := cfg.Bundles[alias]
		if b == nil {
			continue
		}
		for _, s := range b.Servers {
			if sc := cfg.Servers[s]; sc != nil && sc.IsEnabled() {
				granted[s] = true
			}
		}
		for _, s := range b.Exclude {
			denied[s] = true
		}
	}
	for s := range denied {
		delete(granted, s)
	}
	return granted
}

// Servers returns the agent's granted servers, sorted.
func (a *Agent) Servers() []string { return slices.Sorted(maps.Keys(a.granted)) }

// Granted reports whether the agent reaches server.
func (a *Agent) Granted(server string) bool { return a.granted[server] }

// Decide applies docs/agents.md#the-policy-rules, rules 1–6 in order to t for this agent, with the
// session's per-call list (nil when none was given; an empty non-nil list
// allows nothing). It returns RuleNone when the agent may call the tool.
func (a *Agent) Decide(t Tool, perCall []string) Rule {
	switch {
	case !t.Own() && !a.granted[t.Server]:
		return RuleNotGranted
	case t.Filtered:
		return RuleServerFilter
	case t.matches(a.excluded):
		return RuleExcludedTools
	case len(a.allowed) > 0 && !t.listed(a.allowed) && t.Own():
		// A non-empty allowed_tools admits every upstream tool (the seed's
		// `__` auto-admit); the proxy's own tools need an exact entry.
		return RuleAllowedTools
	case perCall != nil && !t.listed(perCall):
		return RulePerCallAllowedTools
	case a.autonomy == AutonomyReadOnly && !t.ReadOnly && !t.Own():
		return RuleReadOnly
	}
	return RuleNone
}

// Visible reports whether an allowed tool is listed, given the agent's
// tool_filter_groups (visibility only, never capability): with no groups
// every tool is listed; with some, an upstream tool must match the tools of
// an `always` group or of a `dynamic` group in active (activated by a
// tool_search keyword). A group without tools matches nothing.
func (a *Agent) Visible(t Tool, active func(group int) bool) bool {
	if len(a.groups) == 0 || t.Own() {
		return true
	}
	for i, g := range a.groups {
		if g.Mode == "dynamic" && (active == nil || !active(i)) {
			continue
		}
		if t.matches(g.Tools) {
			return true
		}
	}
	return false
}

// HasDynamicGroups reports whether any tool_filter_group is dynamic; then
// tool_search is listed in eager mode too (docs/agents.md#agents-bundles-and-policy).
func (a *Agent) HasDynamicGroups() bool {
	for _, g := range a.groups {
		if g.Mode == "dynamic" {
			return true
		}
	}
	return false
}

// GroupsFor returns the dynamic groups one of whose keywords the query
// contains, case-insensitively: a tool_search query stands in for the user
// message the proxy never sees.
func (a *Agent) GroupsFor(query string) []int {
	q := strings.ToLower(query)
	var out []int
	for i, g := range a.groups {
		if g.Mode != "dynamic" {
			continue
		}
		for _, k := range g.Keywords {
			if k != "" && strings.Contains(q, strings.ToLower(k)) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// InAlwaysGroup reports whether t matches an `always` group: in deferred
// mode those tools are listed without a search.
func (a *Agent) InAlwaysGroup(t Tool) bool {
	for _, g := range a.groups {
		if g.Mode == "always" && t.matches(g.Tools) {
			return true
		}
	}
	return false
}

// Approval is the outcome of the approval gate.
type Approval int

// The approval outcomes.
const (
	ApprovalRun Approval = iota // run without asking
	ApprovalAsk                 // ask the user through the client
)

// ApprovalOf applies the seed's order (docs/agents.md#approval) to t: autonomy full → run;
// always_ask match → ask; auto_approve match → run; approved "always"
// earlier in this session → run; else ask. It judges upstream tools: the
// proxy's own tool_search is always run without asking it, and an upstream
// tool that happens to be exposed as "tool_search" is judged like any
// other. always_ask and auto_approve match t's exposed name or its base
// (the name before a collision suffix, docs/agents.md#names).
func (a *Agent) ApprovalOf(t Tool, approvedAlways bool) Approval {
	switch {
	case a.autonomy == AutonomyFull:
		return ApprovalRun
	case t.matches(a.ask):
		return ApprovalAsk
	case t.matches(a.auto), approvedAlways:
		return ApprovalRun
	}
	return ApprovalAsk
}

// Approval is ApprovalOf for a tool known by its exposed name alone.
// Callers that have the tool's record should use ApprovalOf, which also
// matches its base.
func (a *Agent) Approval(exposed string, approvedAlways bool) Approval {
	return a.ApprovalOf(Tool{Exposed: exposed}, approvedAlways)
}

// Autonomy returns the agent's autonomy level.
func (a *Agent) Autonomy() string { return a.autonomy }
