package downstream

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// ownTools are the proxy's own tools (docs/deferred-loading.md,
// docs/resources.md#resources-and-prompts): tool_search and call_tool of
// deferred loading and dynamic groups (this file), and mcp_resources and
// mcp_prompts for hosts that only use tools (owntools_resources.go). It
// says which a session is offered and runs them; it also renders the
// session instructions they need (deferred tools, pinned resources).
type ownTools struct {
	*env
	catalog catalogReader
	views   searchIndexer
	calls   toolCaller
}

// searchIndexer gives the tool_search index of a session's view.
type searchIndexer interface {
	searchIndex(st *session) (*search.Index, map[string]*search.Doc)
}

// toolCaller calls a tool by name through the call chain (call_tool).
type toolCaller interface {
	forwardCall(ctx context.Context, r *request, name string, args, meta json.RawMessage) (json.RawMessage, *wireError)
}

// The proxy's own tools of deferred loading (docs/deferred-loading.md).
const (
	toolSearchName = "tool_search"
	callToolName   = "call_tool"
)

// defaultMaxResults is tool_search's max_results when the model gives none.
const defaultMaxResults = 5

// toolSearchDef and callToolDef are the listed definitions of the own tools.
var (
	toolSearchDef = []byte(`{"name":"tool_search","description":"Find the tools you can use and load their full definitions. ` +
		`Give keywords describing what you want to do, or \"select:name1,name2\" to load tools by exact name. ` +
		`Every tool returned can then be called directly.","inputSchema":{"type":"object","properties":{` +
		`"query":{"type":"string","description":"Keywords, or select:<tool name>[,<tool name>...] for exact names."},` +
		`"max_results":{"type":"number","description":"How many tools a keyword search returns (default 5).","default":5}},` +
		`"required":["query"]},"annotations":{"title":"Search tools","readOnlyHint":true,"openWorldHint":false}}`)
	callToolDef = []byte(`{"name":"call_tool","description":"Call any tool you may use by its exact name, with its arguments. ` +
		`Use it for a tool found with tool_search that is not in your tool list.","inputSchema":{"type":"object","properties":{` +
		`"name":{"type":"string","description":"The exact tool name, as tool_search returned it."},` +
		`"arguments":{"type":"object","description":"The tool's arguments."}},"required":["name"]}}`)
)

// ownTool reports whether name is one of the proxy's own tools and is
// offered to the session: tool_search in deferred mode or when the agent
// has dynamic groups, call_tool in deferred mode unless turned off.
func ownTool(st *session, name string) bool {
	switch name {
	case toolSearchName:
		return st.agent.Deferred || st.agent.HasDynamicGroups()
	case callToolName:
		return st.agent.Deferred && st.agent.CallTool
	}
	return false
}

// readActivations reads the session again from Redis when its state came
// from the replica's copy and its activations decide what it is shown
// (its agent is offered tool_search): a search on another replica may
// have activated a tool whose announcement has not arrived yet
// (sharedState.reread). The error is the store's.
func (s *session) readActivations(ctx context.Context) error {
	sh, ok := s.state.(*sharedState)
	if !ok || !ownTool(s, toolSearchName) {
		return nil
	}
	return sh.reread(ctx)
}

// ownOffered reports whether name is one of the proxy's own tools offered
// to the session: then an upstream tool exposed under the same bare name
// is not listed for it, nor found by its searches (the own one answers).
func (o *ownTools) ownOffered(st *session, name string) bool {
	return ownTool(st, name) || o.resourceToolOffered(st, name, nil)
}

// listedFor reports whether a catalog entry is in the session's tools/list.
func (o *ownTools) listedFor(st *session, e *ToolEntry) bool {
	t := e.policyTool()
	if !e.listed() || st.agent.Decide(t, st.perCall) != filter.RuleNone || o.ownOffered(st, e.Exposed) {
		return false
	}
	if st.agent.Deferred {
		// The tools the session's searches activated, and those of the
		// groups it lists: always groups, and dynamic ones a query woke.
		return st.state.Activated(e.Exposed) || st.agent.InAlwaysGroup(t) ||
			st.agent.HasDynamicGroups() && st.agent.Visible(t, st.state.GroupActive)
	}
	return st.agent.Visible(t, st.state.GroupActive)
}

// ownToolsJSON is the own tools the session lists, each followed by a
// comma; from as for resourceToolServers.
func (o *ownTools) ownToolsJSON(st *session, from *builtFrom) []byte {
	var out []byte
	for _, def := range []struct {
		name string
		raw  []byte
	}{{toolSearchName, toolSearchDef}, {callToolName, callToolDef}, {mcpResourcesName, mcpResourcesDef}, {mcpPromptsName, mcpPromptsDef}} {
		if ownTool(st, def.name) || o.resourceToolOffered(st, def.name, from) {
			out = append(append(out, def.raw...), ',')
		}
	}
	return out
}

// ownCall runs the proxy's own tools. own is false when name is not one
// the session is offered; an own resource tool a policy rule denies is refused by
// name (docs/agents.md#the-policy-rules: the own tools follow rules 3–5).
func (o *ownTools) ownCall(ctx context.Context, r *request, name string, args, meta json.RawMessage) (json.RawMessage, *wireError, bool) {
	st := r.sess
	switch {
	case ownTool(st, name) && name == toolSearchName:
		return o.toolSearch(r, args), nil, true // always auto-approved
	case ownTool(st, name):
		res, werr := o.callToolTool(ctx, r, args, meta)
		return res, werr, true
	case name != mcpResourcesName && name != mcpPromptsName:
		return nil, nil, false
	case len(o.resourceToolServers(st, name == mcpResourcesName, nil)) == 0:
		return nil, nil, false
	}
	if rule := st.agent.Decide(filter.Tool{Exposed: name}, st.perCall); rule != filter.RuleNone {
		o.opts.Metrics.PolicyDenial(st.agent.Name, string(rule))
		return denied(name, rule), nil, true
	}
	return o.resourceTool(ctx, r, args, name == mcpResourcesName), nil, true
}

// toolSearch runs the tool_search tool (docs/deferred-loading.md) and activates what it
// returns for the session, which then gets one list_changed.
func (o *ownTools) toolSearch(r *request, args json.RawMessage) json.RawMessage {
	st := r.sess
	var in struct {
		Query      string   `json:"query"`
		MaxResults *float64 `json:"max_results"`
	}
	if len(args) > 0 && json.Unmarshal(args, &in) != nil {
		return textResult("arguments must be an object with a string query", true)
	}
	query := strings.TrimSpace(in.Query)
	if query == "" {
		return textResult(search.QueryRequired, true)
	}
	max := defaultMaxResults
	if in.MaxResults != nil && *in.MaxResults >= 1 {
		max = int(min(*in.MaxResults, 1000))
	}
	ix, docs := o.views.searchIndex(st)
	var found []*search.Doc
	var text string
	if names, ok := search.ParseSelect(query); ok {
		o.opts.Metrics.ToolSearch(st.agent.Name, "select")
		var missing []string
		for _, n := range names {
			if d := docs[n]; d != nil {
				found = append(found, d)
			} else {
				missing = append(missing, n) // unknown or denied: never told apart
			}
		}
		text = search.FormatSelect(found, missing)
	} else {
		o.opts.Metrics.ToolSearch(st.agent.Name, "keyword")
		for _, h := range ix.Search(query, max) {
			found = append(found, h.Doc)
		}
		text = search.NoMatches
		if len(found) > 0 {
			text = search.Format(found)
		}
	}
	names := make([]string, len(found))
	for i, d := range found {
		names[i] = d.Name
	}
	if st.state.Activate(names, st.agent.GroupsFor(query)) {
		// On the request's own stream, ahead of the result: the client
		// learns its list changed before it reads what the search found.
		_ = r.out.send(notification("notifications/tools/list_changed", nil))
	}
	return textResult(text, false)
}

// callTool runs call_tool: the named tool through the same path as a direct
// call, so it returns whatever the direct call would.
func (o *ownTools) callToolTool(ctx context.Context, r *request, args, meta json.RawMessage) (json.RawMessage, *wireError) {
	var in struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(args) > 0 && json.Unmarshal(args, &in) != nil {
		return textResult("arguments must be an object with a string name", true), nil
	}
	switch {
	case in.Name == "":
		return textResult("call_tool needs the name of the tool to call", true), nil
	case in.Name == callToolName:
		return textResult("call_tool cannot call itself", true), nil
	case len(in.Arguments) > 0 && string(in.Arguments) != "null" && in.Arguments[0] != '{':
		return textResult("arguments must be an object", true), nil
	}
	return o.calls.forwardCall(ctx, r, in.Name, in.Arguments, meta)
}

// deferredInstructions is the initialize instructions section of deferred
// mode: what is available and how to load it (docs/deferred-loading.md).
func (o *ownTools) deferredInstructions(st *session) string {
	_, docs := o.views.searchIndex(st)
	list := make([]*search.Doc, 0, len(docs))
	for _, e := range o.catalog.Catalog().tools {
		if d := docs[e.Exposed]; d != nil && !o.listedFor(st, e) {
			list = append(list, d)
		}
	}
	var b strings.Builder
	b.WriteString("## Deferred Tools\n\n")
	b.WriteString("The tools below can be used, but their definitions are not loaded yet. " +
		"Before calling one, call tool_search with keywords for what you want to do, or with " +
		"\"select:<name>[,<name>...]\" for exact names; the tools it returns can then be called directly")
	if st.agent.CallTool {
		b.WriteString(", or through call_tool")
	}
	b.WriteString(".\n\n")
	b.WriteString(search.DeferredList(list))
	return b.String()
}

// needsInstructions reports whether a session's initialize (or
// server/discover) result carries instructions of the proxy's own: the
// deferred tools and the pinned resources. They are the model's only list
// of deferred tools, so such a session's first answer waits for upstreams
// (at most startup_wait).
func (o *ownTools) needsInstructions(s *session) bool {
	return s.agent.Deferred || o.hasPinned()
}

// sessionInstructions renders those instructions.
func (o *ownTools) sessionInstructions(ctx context.Context, r *request) string {
	s := r.sess
	var parts []string
	if s.agent.Deferred {
		parts = append(parts, o.deferredInstructions(s))
	}
	if pinned := o.pinnedInstructions(ctx, r); pinned != "" {
		parts = append(parts, pinned)
	}
	return strings.Join(parts, "\n")
}
