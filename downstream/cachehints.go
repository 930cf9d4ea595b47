package downstream

import (
	"strconv"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Cache hints (MCP 2026-07-28, server/utilities/caching): a 2026-07-28
// client is told how long a list or a read stays fresh (ttlMs) and who
// may share it (cacheScope). A merged list is made of the lists of the
// servers the client's agent is granted, so it stays fresh only as long
// as the least fresh of them, and is public only when every one of them
// is and every client of the proxy gets the same list
// (docs/protocol.md#list-order-and-cache-hints). The proxy's own copies of
// the servers' lists honour the servers' hints the same way
// (upstream.Conn.RefreshStale).

// cacheHint is what a result tells the client: ttlMs and whether
// cacheScope is "public". The zero value is stale at once, private.
type cacheHint struct {
	ttl    time.Duration
	public bool
}

// members are the result's ttlMs and cacheScope members.
func (h cacheHint) members() []rawjson.KV {
	scope := `"private"`
	if h.public {
		scope = `"public"`
	}
	return []rawjson.KV{
		{Key: "ttlMs", Value: []byte(strconv.FormatInt(max(h.ttl.Milliseconds(), 0), 10))},
		{Key: "cacheScope", Value: []byte(scope)},
	}
}

// listKind is the snapshot's part that a list method merges.
type listKind struct {
	hint    func(*upstream.Snapshot) upstream.CacheHint
	offered func(*upstream.Snapshot) bool // the server has that list
	allowed func(e *env, server string) bool
}

var listKinds = map[string]listKind{
	"tools/list": {
		hint:    func(s *upstream.Snapshot) upstream.CacheHint { return s.ToolsHint },
		offered: func(s *upstream.Snapshot) bool { return s.Capabilities.Tools },
		allowed: func(*env, string) bool { return true },
	},
	"resources/list": {
		hint:    func(s *upstream.Snapshot) upstream.CacheHint { return s.ResourcesHint },
		offered: func(s *upstream.Snapshot) bool { return s.Capabilities.Resources },
		allowed: func(e *env, srv string) bool { return e.gen().cfg.Servers[srv].ResourcesEnabled() },
	},
	"resources/templates/list": {
		hint:    func(s *upstream.Snapshot) upstream.CacheHint { return s.TemplatesHint },
		offered: func(s *upstream.Snapshot) bool { return s.Capabilities.Resources },
		allowed: func(e *env, srv string) bool { return e.gen().cfg.Servers[srv].ResourcesEnabled() },
	},
	"prompts/list": {
		hint:    func(s *upstream.Snapshot) upstream.CacheHint { return s.PromptsHint },
		offered: func(s *upstream.Snapshot) bool { return s.Capabilities.Prompts },
		allowed: func(e *env, srv string) bool { return e.gen().cfg.Servers[srv].PromptsEnabled() },
	},
}

// sharedView reports whether every client of the proxy gets what s gets:
// no agents (every client is the implicit agent), no per-call list, no
// tools activated by the session itself. Only then may a result be
// public: lists differ per agent.
func (e *env) sharedView(s *session) bool {
	return !e.gen().cfg.HasAgents() && s.perCall == nil && s.state.NothingActivated()
}

// listHint is the cache hint of s's merged list of method: the smallest
// remaining TTL of the granted servers' lists (a server that is not
// connected, or gave no hint, makes it 0), public only when all of them
// are and sharedView holds. A list of no server's is not cached.
func (e *env) listHint(s *session, method string) cacheHint {
	k, ok := listKinds[method]
	if !ok {
		return cacheHint{}
	}
	g := e.gen()
	now := time.Now()
	out := cacheHint{ttl: -1, public: e.sharedView(s)}
	for _, name := range g.serverNames() {
		if g.cfg.Servers[name] == nil || !s.agent.Granted(name) || !k.allowed(e, name) {
			continue
		}
		snap := g.ups[name].Snapshot()
		var h upstream.CacheHint
		switch {
		case !snap.Listed():
			// Not connected: what it will list is unknown.
		case !k.offered(snap):
			continue
		default:
			h = k.hint(snap)
		}
		r := h.Remaining(now)
		if out.ttl < 0 || r < out.ttl {
			out.ttl = r
		}
		out.public = out.public && h.Given && h.Public
	}
	if out.ttl < 0 {
		return cacheHint{}
	}
	return out
}

// readHint is the cache hint of a resources/read result: the server's
// own (none given is 0), public only when it says so and sharedView holds.
func (e *env) readHint(s *session, res []byte) cacheHint {
	ttl, _, _ := rawjson.Get(res, "ttlMs")
	scope, _, _ := rawjson.Get(res, "cacheScope")
	h := upstream.ParseCacheHint(ttl, scope, time.Now())
	return cacheHint{ttl: h.TTL, public: h.Given && h.Public && e.sharedView(s)}
}

// staleRefresher is an upstream that reads its lists again once their
// cache hints have passed (upstream.Conn).
type staleRefresher interface {
	RefreshStale()
}

// refreshStale has the granted servers whose lists have outlived their
// hints read them again: the client is served the lists as they are, and
// list_changed follows when one changed.
func (e *env) refreshStale(s *session) {
	g := e.gen()
	for name, up := range g.ups {
		if r, ok := up.(staleRefresher); ok && s.agent.Granted(name) {
			r.RefreshStale()
		}
	}
}
