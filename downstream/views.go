package downstream

import (
	"bytes"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// viewCache holds the resolved agents of the current config and the views
// computed from them, shared by the sessions alike.
type viewCache struct {
	mu     sync.Mutex
	agents map[string]*filter.Agent
	views  map[*filter.Agent]*view // by the agent of sessions with no per-call list
}

// reset forgets everything (a reload: the agents may have changed).
func (v *viewCache) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.agents = map[string]*filter.Agent{}
	v.views = map[*filter.Agent]*view{}
}

// view is the tools one kind of session sees: its agent and per-call list
// applied to one catalog.
type view struct {
	catalog  *Catalog
	listJSON []byte // the tools/list result of sessions that have activated nothing

	modernOnce sync.Once // listJSON decorated for 2026-07-28 requests, made on first use
	modern     []byte

	searchOnce sync.Once // the tool_search index of the view, built on first use
	index      *search.Index
	docs       map[string]*search.Doc
}

// resolveAgent returns the resolved agent, cached per config.
func (p *Proxy) resolveAgent(name string) (*filter.Agent, error) {
	if name == "" {
		name = p.defaultAgentName()
	}
	v := &p.views
	v.mu.Lock()
	defer v.mu.Unlock()
	if a := v.agents[name]; a != nil {
		return a, nil
	}
	a, err := filter.Resolve(p.gen().cfg, name)
	if err != nil {
		return nil, err
	}
	v.agents[name] = a
	return a, nil
}

// viewFor returns the session's view of the current catalog, computed once
// per (agent, catalog) and shared by the sessions of the agent that have
// no per-call list.
func (p *Proxy) viewFor(s *session) *view {
	c := p.Catalog()
	if s.perCall != nil {
		// Client-chosen lists are not cached: a client could grow the cache
		// without end by sending a new list each time.
		return &view{catalog: c, listJSON: p.sessionList(&session{agent: s.agent, perCall: s.perCall})}
	}
	v := &p.views
	v.mu.Lock()
	defer v.mu.Unlock()
	if cached := v.views[s.agent]; cached != nil && cached.catalog == c {
		return cached
	}
	out := &view{catalog: c, listJSON: p.sessionList(&session{agent: s.agent})}
	v.views[s.agent] = out
	return out
}

// modernList is listJSON as a 2026-07-28 result (decorateResult), made
// once per view: the stateless protocol lists on every request.
func (v *view) modernList(p *Proxy) []byte {
	v.modernOnce.Do(func() { v.modern = p.decorateResult("tools/list", v.listJSON) })
	return v.modern
}

// listFor is the session's tools/list result: the shared view's while the
// session has activated nothing, else its own.
func (p *Proxy) listFor(s *session) []byte {
	if s.deferred.empty() {
		return p.viewFor(s).listJSON
	}
	return p.sessionList(s)
}

// PolicyTool describes an entry to the policy: its exposed, base and
// default names, its server, its read-only hint after any override.
func (e *ToolEntry) PolicyTool() filter.Tool { return e.policyTool() }

// policyTool describes an entry to the policy.
func (e *ToolEntry) policyTool() filter.Tool {
	return filter.Tool{Exposed: e.Exposed, Base: e.Base, Default: e.Default, Server: e.Server, ReadOnly: e.ReadOnly, Filtered: e.Filtered}
}

// denied is the isError result of a tool a policy rule 3–6 denies (docs/agents.md#the-policy-rules).
func denied(exposed string, rule filter.Rule) []byte {
	return textResult("tool '"+exposed+"' is denied by "+string(rule), true)
}

// textResult builds a tools/call result with one text item.
func textResult(text string, isError bool) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"content":[{"type":"text","text":`)
	buf.Write(rawjson.String(text))
	buf.WriteString(`}]`)
	if isError {
		buf.WriteString(`,"isError":true`)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}
