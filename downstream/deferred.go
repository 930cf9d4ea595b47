package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// The proxy's own tools of deferred loading (docs/deferred-loading.md).
const (
	toolSearchName = "tool_search"
	callToolName   = "call_tool"
)

// defaultMaxResults is tool_search's max_results when the model gives none
// (seed).
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

// deferredState is a session's deferred-loading state: the tools its
// searches activated and the dynamic groups its queries made visible.
type deferredState struct {
	mu        sync.Mutex
	activated map[string]bool
	groups    map[int]bool
}

func (d *deferredState) isActivated(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.activated[name]
}

func (d *deferredState) groupActive(i int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.groups[i]
}

// activate records names and groups; it reports whether anything was new.
func (d *deferredState) activate(names []string, groups []int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.activated == nil {
		d.activated, d.groups = map[string]bool{}, map[int]bool{}
	}
	changed := false
	for _, n := range names {
		if !d.activated[n] {
			d.activated[n], changed = true, true
		}
	}
	for _, g := range groups {
		if !d.groups[g] {
			d.groups[g], changed = true, true
		}
	}
	return changed
}

// empty reports whether the session has activated nothing yet, so that it
// can share the agent's cached view.
func (d *deferredState) empty() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.activated) == 0 && len(d.groups) == 0
}

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

// ownOffered reports whether name is one of the proxy's own tools offered
// to the session: then an upstream tool exposed under the same bare name
// is not listed for it, nor found by its searches (the own one answers).
func (p *Proxy) ownOffered(st *session, name string) bool {
	return ownTool(st, name) || p.seedToolOffered(st, name, nil)
}

// listedFor reports whether a catalog entry is in the session's tools/list.
func (p *Proxy) listedFor(st *session, e *ToolEntry) bool {
	t := e.policyTool()
	if !e.listed() || st.agent.Decide(t, st.perCall) != filter.RuleNone || p.ownOffered(st, e.Exposed) {
		return false
	}
	if st.agent.Deferred {
		// The tools the session's searches activated, and those of the
		// groups it lists: always groups, and dynamic ones a query woke.
		return st.deferred.isActivated(e.Exposed) || st.agent.InAlwaysGroup(t) ||
			st.agent.HasDynamicGroups() && st.agent.Visible(t, st.deferred.groupActive)
	}
	return st.agent.Visible(t, st.deferred.groupActive)
}

// ownToolsJSON is the own tools the session lists, each followed by a
// comma; from as for seedServers.
func (p *Proxy) ownToolsJSON(st *session, from *builtFrom) []byte {
	var out []byte
	for _, def := range []struct {
		name string
		raw  []byte
	}{{toolSearchName, toolSearchDef}, {callToolName, callToolDef}, {mcpResourcesName, mcpResourcesDef}, {mcpPromptsName, mcpPromptsDef}} {
		if ownTool(st, def.name) || p.seedToolOffered(st, def.name, from) {
			out = append(append(out, def.raw...), ',')
		}
	}
	return out
}

// ownCall runs the proxy's own tools. own is false when name is not one
// the session is offered; a seed tool a policy rule denies is refused by
// name (docs/agents.md#the-policy-rules: the own tools follow rules 3–5).
func (p *Proxy) ownCall(ctx context.Context, r *request, name string, args, meta json.RawMessage) (json.RawMessage, *wireError, bool) {
	st := r.sess
	switch {
	case ownTool(st, name) && name == toolSearchName:
		return p.toolSearch(r, args), nil, true // always auto-approved
	case ownTool(st, name):
		res, werr := p.callToolTool(ctx, r, args, meta)
		return res, werr, true
	case name != mcpResourcesName && name != mcpPromptsName:
		return nil, nil, false
	case len(p.seedServers(st, name == mcpResourcesName, nil)) == 0:
		return nil, nil, false
	}
	if rule := st.agent.Decide(filter.Tool{Exposed: name}, st.perCall); rule != filter.RuleNone {
		p.opts.Metrics.PolicyDenial(st.agent.Name, string(rule))
		return denied(name, rule), nil, true
	}
	if name == mcpResourcesName {
		return p.mcpResources(ctx, st, args), nil, true
	}
	return p.mcpPrompts(ctx, st, args), nil, true
}

// sessionList is the session's tools/list result, {"tools":[...]}, built
// in one allocation. A session that lists exactly the catalog's listed
// tools and own tools gets the catalog's own result, no copy.
func (p *Proxy) sessionList(st *session) []byte {
	const head, tail = `{"tools":`, `}`
	c := p.Catalog()
	own := p.ownToolsJSON(st, nil)
	keep := make([]bool, len(c.tools))
	all := bytes.Equal(own, c.own)
	n := len(head) + 2 + len(own) + len(tail)
	for i, e := range c.tools {
		keep[i] = p.listedFor(st, e)
		all = all && keep[i] == e.listed()
		if keep[i] {
			n += len(e.Raw) + 1
		}
	}
	if all {
		return c.result // shared, and full: an append copies
	}
	out := make([]byte, 0, n)
	out = append(out, head...)
	out = append(out, '[')
	out = append(out, own...) // each followed by a comma
	for i, e := range c.tools {
		if keep[i] {
			out = append(append(out, e.Raw...), ',')
		}
	}
	if out[len(out)-1] == ',' {
		out = out[:len(out)-1]
	}
	out = append(out, ']')
	out = append(out, tail...)
	return out[:len(out):len(out)] // views share it: an append must copy
}

// searchIndex is the index of the tools the session may call: only those
// are ever indexed or returned (docs/deferred-loading.md). It is built once per agent,
// per-call list and catalog.
func (p *Proxy) searchIndex(st *session) (*search.Index, map[string]*search.Doc) {
	v := p.viewFor(st)
	v.searchOnce.Do(func() {
		var docs []search.Doc
		for _, e := range v.catalog.tools {
			if !e.listed() || st.agent.Decide(e.policyTool(), st.perCall) != filter.RuleNone || p.ownOffered(st, e.Exposed) {
				continue
			}
			schema, _, _ := rawjson.Get(e.Raw, "inputSchema")
			docs = append(docs, search.Doc{Name: e.Exposed, Server: e.Server, Description: e.Description, Schema: schema, Raw: e.Raw})
		}
		v.index = search.Build(docs)
		v.docs = make(map[string]*search.Doc, len(docs))
		for i := range docs {
			v.docs[docs[i].Name] = &docs[i]
		}
	})
	return v.index, v.docs
}

// toolSearch runs the tool_search tool (docs/deferred-loading.md) and activates what it
// returns for the session, which then gets one list_changed.
func (p *Proxy) toolSearch(r *request, args json.RawMessage) json.RawMessage {
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
	ix, docs := p.searchIndex(st)
	var found []*search.Doc
	var text string
	if names, ok := search.ParseSelect(query); ok {
		p.opts.Metrics.ToolSearch(st.agent.Name, "select")
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
		p.opts.Metrics.ToolSearch(st.agent.Name, "keyword")
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
	if st.deferred.activate(names, st.agent.GroupsFor(query)) {
		// On the request's own stream, ahead of the result: the client
		// learns its list changed before it reads what the search found.
		_ = r.out.send(notification("notifications/tools/list_changed", nil))
	}
	return textResult(text, false)
}

// callTool runs call_tool: the named tool through the same path as a direct
// call, so it returns whatever the direct call would.
func (p *Proxy) callToolTool(ctx context.Context, r *request, args, meta json.RawMessage) (json.RawMessage, *wireError) {
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
	return p.forwardCall(ctx, r, in.Name, in.Arguments, meta)
}

// deferredInstructions is the initialize instructions section of deferred
// mode: what is available and how to load it (docs/deferred-loading.md).
func (p *Proxy) deferredInstructions(st *session) string {
	_, docs := p.searchIndex(st)
	list := make([]*search.Doc, 0, len(docs))
	for _, e := range p.Catalog().tools {
		if d := docs[e.Exposed]; d != nil && !p.listedFor(st, e) {
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
