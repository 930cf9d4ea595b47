package downstream

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// catalogState is the catalog part of the proxy: the current catalog and
// what it was built from, so that a Refresh with nothing new does nothing.
type catalogState struct {
	current atomic.Pointer[Catalog]

	mu        sync.Mutex // serializes builds
	lastTools map[string][]upstream.Tool
	// built is what the current catalog was built from: Refresh has nothing
	// to do while the generation and every snapshot are the same.
	builtGen   *generation
	builtSnaps []*upstream.Snapshot
	// calls counts Refresh calls; covered (guarded by mu) is the count when
	// the last build began reading snapshots. A call waiting for mu whose
	// number is covered has been served by that build.
	calls   atomic.Uint64
	covered uint64
	// seeds (guarded by mu) says which listed servers offer resources or
	// prompts as of the last build: mcp_resources and mcp_prompts are
	// listed while one does, so a change is a list_changed.
	seeds string
}

// reviewer is tool integrity's review for the catalog of g, nil when the
// proxy has no guard.
func (p *Proxy) reviewer(g *generation) reviewer {
	guard := p.opts.Integrity
	if guard == nil {
		return nil
	}
	return func(server string, tools []upstream.Tool, shown []shownTool, peers *integrity.Peers) []integrity.Verdict {
		in := integrity.Server{Name: server, Policy: integrity.PolicyOf(g.cfg, server), Tools: make([]integrity.Tool, len(tools))}
		for i, t := range tools {
			in.Tools[i] = integrity.Tool{Name: t.Name, Upstream: t.Raw}
			if shown[i].ov != nil {
				// The scan reads what clients would see (docs/security.md#tool-integrity, docs/agents.md#overrides-and-rate-limits).
				in.Tools[i].Visible = shown[i].raw
			}
		}
		return guard.Review(in, peers).Verdicts
	}
}

// Reevaluate rebuilds the catalog although no upstream changed: tool
// integrity's verdicts did (an approval made by another process).
func (p *Proxy) Reevaluate() {
	c := &p.catalogs
	c.mu.Lock()
	c.builtGen = nil
	c.mu.Unlock()
	p.Refresh()
}

func (c *catalogState) init(style namespace.Style) {
	c.lastTools = map[string][]upstream.Tool{}
	empty := buildCatalog(style, nil)
	empty.surface, _ = buildSurface(style, nil, nil)
	c.current.Store(empty)
}

// UpstreamChanged is Refresh for a new upstream snapshot, except while the
// start is pending (an upstream of the generation the proxy started with
// is still making its first connection, within startup_wait): then it
// builds nothing. No session sees the catalog before the start ends (its
// first tools/list waits for it, docs/operations.md#startup), and a request that needs the
// catalog sooner builds it (catchUp); so the servers connecting at once
// make one build when the start ends, not one per handful of snapshots,
// each of which exposed and reviewed every tool of the servers connected
// so far. The first snapshot it holds back starts a waitStartup, which
// builds when the start ends (every first connection made or failed, or
// startup_wait over; a snapshot can arrive before its server's Ready
// closes). A reload's servers build as they connect: their sessions may
// have listed.
func (p *Proxy) UpstreamChanged() {
	g := p.gen()
	if g.first && p.startupPending() {
		g.watchStart.Do(func() { go p.waitStartup(context.Background()) })
		return
	}
	p.Refresh()
}

// Refresh rebuilds the catalog from the upstreams' current snapshots and,
// when the listed tools changed, sends notifications/tools/list_changed to
// every initialized session (and the resources and prompts ones when those
// lists changed). It is called after every upstream snapshot (through
// UpstreamChanged) and is cheap when nothing changed. Calls that pile up
// while a build runs are served by one build that starts after all of
// them. When Refresh returns, a build that began after the call has
// finished.
func (p *Proxy) Refresh() {
	c := &p.catalogs
	call := c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.covered >= call {
		return
	}
	c.covered = c.calls.Load()
	old := c.current.Load()
	g := p.gen()
	names := g.serverNames()
	snaps := make([]*upstream.Snapshot, len(names))
	for i, name := range names {
		snaps[i] = g.ups[name].Snapshot()
	}
	// Snapshots are immutable, so the same pointers give the same catalog.
	if g == c.builtGen && slices.Equal(snaps, c.builtSnaps) {
		return
	}
	c.builtGen, c.builtSnaps = g, snaps
	for name := range c.lastTools {
		if g.ups[name] == nil {
			delete(c.lastTools, name) // removed by a reload
		}
	}
	var servers []serverTools
	var surfaces []surfaceServer
	var seeds []byte // which listed servers back mcp_resources and mcp_prompts
	for i, name := range names {
		cfg := g.cfg.Servers[name]
		snap := snaps[i]
		connected := snap.Listed() // connected, or within reconnect_wait of a drop
		if connected {
			c.lastTools[name] = snap.Tools
		}
		servers = append(servers, serverTools{
			name: name, prefix: cfg.PrefixValue(), include: cfg.Tools.Include, exclude: cfg.Tools.Exclude,
			connected: connected, tools: c.lastTools[name], overrides: g.overrides[name],
		})
		surfaces = append(surfaces, surfaceServer{
			name: name, prefix: cfg.PrefixValue(), connected: connected,
			resources:     snap.Capabilities.Resources && cfg.ResourcesEnabled(),
			prompts:       snap.Capabilities.Prompts && cfg.PromptsEnabled(),
			snapResources: snap.Resources, snapTemplates: snap.ResourceTemplates, snapPrompts: snap.Prompts,
		})
		if s := surfaces[len(surfaces)-1]; s.connected && (s.resources || s.prompts) {
			seeds = fmt.Appendf(seeds, "%s:%t:%t,", name, s.resources, s.prompts)
		}
	}
	byName := make(map[string]*upstream.Snapshot, len(names))
	for i, name := range names {
		byName[name] = snaps[i]
	}
	cat := rebuildCatalog(p.style(), servers, old, p.reviewer(g), p.defaultOwnTools(&builtFrom{g, byName}))
	listed := cat.ListedTools()
	for i, name := range names {
		up := snaps[i].State == upstream.StateConnected
		n := 0 // what tools/list shows of the server (none while it is down)
		if up {
			n = listed[name]
		}
		p.opts.Metrics.UpstreamState(name, up, n)
	}
	var sw []string
	cat.surface, sw = buildSurface(p.style(), surfaces, old.surface)
	cat.warnings = append(cat.warnings, sw...)
	p.notifySurfaceChanges(old.surface, cat.surface)
	for _, w := range cat.warnings {
		if !slices.Contains(old.warnings, w) {
			p.log.Warn().Msg(w)
		}
	}
	c.current.Store(cat)
	seedsChanged := c.seeds != string(seeds)
	c.seeds = string(seeds)
	if !sameListing(cat, old) || seedsChanged {
		p.broadcast("notifications/tools/list_changed", nil, nil)
	}
}

// builtFrom is the generation and the snapshots a catalog build read.
type builtFrom struct {
	g     *generation
	snaps map[string]*upstream.Snapshot
}

// defaultOwnTools are the own tools a session of the default agent of
// b.g lists with the servers as b has them (ownToolsJSON), which a catalog
// build puts at the head of its result so that such sessions share it.
// The agent is resolved from b.g's config, not the view cache, which a
// reload resets only after switching generations.
func (p *Proxy) defaultOwnTools(b *builtFrom) []byte {
	name := config.ImplicitAgent
	if b.g.cfg.HasAgents() {
		name = b.g.cfg.DefaultAgent
	}
	a, err := filter.Resolve(b.g.cfg, name)
	if err != nil {
		return nil
	}
	return p.ownToolsJSON(&session{agent: a}, b)
}
