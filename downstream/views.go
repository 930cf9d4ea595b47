package downstream

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// viewCache holds the resolved agents of the current config and the views
// computed from them, shared by the sessions alike.
type viewCache struct {
	gens    generations
	catalog catalogReader
	own     ownOffer

	mu     sync.Mutex
	agents map[string]*filter.Agent
	views  map[*filter.Agent]*view // by the agent of sessions with no per-call list
}

// catalogReader reads the current catalog.
type catalogReader interface {
	Catalog() *Catalog
}

// ownOffer is what a view needs of the own tools: which the session is
// offered, and so which catalog entries it lists.
type ownOffer interface {
	ownOffered(st *session, name string) bool
	listedFor(st *session, e *ToolEntry) bool
	ownToolsJSON(st *session, from *builtFrom) []byte
}

func newViewCache(gens generations, catalog catalogReader, own ownOffer) *viewCache {
	v := &viewCache{gens: gens, catalog: catalog, own: own}
	v.reset()
	return v
}

// reset forgets everything (a reload: the agents may have changed).
func (vc *viewCache) reset() {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	vc.agents = map[string]*filter.Agent{}
	vc.views = map[*filter.Agent]*view{}
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
func (vc *viewCache) resolveAgent(name string) (*filter.Agent, error) {
	g := vc.gens.gen()
	if name == "" {
		name = g.defaultAgentName()
	}
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if a := vc.agents[name]; a != nil {
		return a, nil
	}
	a, err := filter.Resolve(g.cfg, name)
	if err != nil {
		return nil, err
	}
	vc.agents[name] = a
	return a, nil
}

// viewFor returns the session's view of the current catalog, computed once
// per (agent, catalog) and shared by the sessions of the agent that have
// no per-call list.
func (vc *viewCache) viewFor(s *session) *view {
	c := vc.catalog.Catalog()
	if s.perCall != nil {
		// Client-chosen lists are not cached: a client could grow the cache
		// without end by sending a new list each time.
		return &view{catalog: c, listJSON: vc.sessionList(&session{agent: s.agent, perCall: s.perCall, state: newMemState()})}
	}
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if cached := vc.views[s.agent]; cached != nil && cached.catalog == c {
		return cached
	}
	out := &view{catalog: c, listJSON: vc.sessionList(&session{agent: s.agent, state: newMemState()})}
	vc.views[s.agent] = out
	return out
}

// modernList is listJSON as a 2026-07-28 result (decorateResult), made
// once per view: the stateless protocol lists on every request.
// The list's cache hint is the zero one (stale at once, private).
func (v *view) modernList(decorate func(method string, res json.RawMessage, hint cacheHint) json.RawMessage) []byte {
	v.modernOnce.Do(func() { v.modern = decorate("tools/list", v.listJSON, cacheHint{}) })
	return v.modern
}

// listFor is the session's tools/list result: the shared view's while the
// session has activated nothing, else its own.
func (vc *viewCache) listFor(s *session) []byte {
	if s.state.NothingActivated() {
		return vc.viewFor(s).listJSON
	}
	return vc.sessionList(s)
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

// sessionList is the session's tools/list result, {"tools":[...]}, built
// in one allocation. A session that lists exactly the catalog's listed
// tools and own tools gets the catalog's own result, no copy.
func (vc *viewCache) sessionList(st *session) []byte {
	const head, tail = `{"tools":`, `}`
	c := vc.catalog.Catalog()
	own := vc.own.ownToolsJSON(st, nil)
	keep := make([]bool, len(c.order))
	all := bytes.Equal(own, c.own)
	n := len(head) + 2 + len(own) + len(tail)
	for i, e := range c.order {
		keep[i] = vc.own.listedFor(st, e)
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
	for i, e := range c.order {
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
func (vc *viewCache) searchIndex(st *session) (*search.Index, map[string]*search.Doc) {
	v := vc.viewFor(st)
	v.searchOnce.Do(func() {
		var docs []search.Doc
		for _, e := range v.catalog.tools {
			if !e.listed() || st.agent.Decide(e.policyTool(), st.perCall) != filter.RuleNone || vc.own.ownOffered(st, e.Exposed) {
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
