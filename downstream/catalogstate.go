package downstream

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// catalogState is the catalog part of the proxy: it builds the merged
// catalog of the upstreams' tools, resources and prompts from their
// snapshots (catalog.go, surface.go), tells the sessions when their lists
// changed, and waits for the start (docs/operations.md#startup). It keeps
// the current catalog and what it was built from, so that a Refresh with
// nothing new does nothing.
type catalogState struct {
	*env
	sessions *sessionTable
	own      ownLister

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
	// resourceTools (guarded by mu) says which listed servers offer resources or
	// prompts as of the last build: mcp_resources and mcp_prompts are
	// listed while one does, so a change is a list_changed.
	resourceTools string
	// announced (guarded by mu) is each server's count of list_changed
	// announcements as of the last build, and the Upstream that counted
	// them: a count that grew since is an announcement to pass on.
	announced map[string]announcedMark
}

// announcedMark is a server's Upstream and its announcement counts, as a
// build saw them.
type announcedMark struct {
	up    Upstream
	count upstream.Announced
}

// announcements tells which servers announced a change of their tools,
// resources or prompts since the last build: the upstream is the same
// and its count grew. A server new to the build, or one whose Upstream a
// reload replaced, has announced nothing yet. It records the counts for
// the next build.
func (cs *catalogState) announcements(g *generation, names []string, snaps []*upstream.Snapshot) (tools, resources, prompts map[string]bool) {
	tools, resources, prompts = map[string]bool{}, map[string]bool{}, map[string]bool{}
	next := make(map[string]announcedMark, len(names))
	for i, name := range names {
		mark := announcedMark{up: g.ups[name], count: snaps[i].Announced}
		next[name] = mark
		prev, ok := cs.announced[name]
		if !ok || prev.up != mark.up {
			continue
		}
		if mark.count.Tools > prev.count.Tools {
			tools[name] = true
		}
		if mark.count.Resources > prev.count.Resources {
			resources[name] = true
		}
		if mark.count.Prompts > prev.count.Prompts {
			prompts[name] = true
		}
	}
	cs.announced = next
	return tools, resources, prompts
}

// reviewer is tool integrity's review for the catalog of g, nil when the
// proxy has no guard.
func (cs *catalogState) reviewer(g *generation) reviewer {
	guard := cs.opts.Integrity
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
func (cs *catalogState) Reevaluate() {
	cs.mu.Lock()
	cs.builtGen = nil
	cs.mu.Unlock()
	cs.Refresh()
}

// ownLister is what a catalog build needs of the own tools: the
// definitions a session lists (the default agent's lead the catalog's
// result).
type ownLister interface {
	ownToolsJSON(st *session, from *builtFrom) []byte
}

func newCatalogState(e *env, sessions *sessionTable, own ownLister) *catalogState {
	c := &catalogState{env: e, sessions: sessions, own: own}
	c.init(e.style())
	return c
}

func (cs *catalogState) init(style namespace.Style) {
	cs.lastTools = map[string][]upstream.Tool{}
	empty := buildCatalog(style, nil)
	empty.surface, _ = buildSurface(style, nil, nil)
	cs.current.Store(empty)
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
func (cs *catalogState) UpstreamChanged() {
	g := cs.gen()
	if g.first && cs.startupPending() {
		g.watchStart.Do(func() { go cs.waitStartup(context.Background()) })
		return
	}
	cs.Refresh()
}

// Refresh rebuilds the catalog from the upstreams' current snapshots and,
// when the listed tools changed, sends notifications/tools/list_changed to
// every initialized session (and the resources and prompts ones when those
// lists changed). An upstream's list_changed is passed on even when the
// rebuilt list is the same: the sessions granted that server get the
// notification of that kind (docs/protocol.md#list-order-and-cache-hints).
// It is called after every upstream snapshot (through UpstreamChanged) and
// is cheap when nothing changed. Calls that pile up while a build runs are served by one build
// that starts after all of them. When Refresh returns, a build that began
// after the call has finished.
func (cs *catalogState) Refresh() {
	call := cs.calls.Add(1)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.covered >= call {
		return
	}
	cs.covered = cs.calls.Load()
	old := cs.current.Load()
	g := cs.gen()
	names := g.serverNames()
	snaps := make([]*upstream.Snapshot, len(names))
	for i, name := range names {
		snaps[i] = g.ups[name].Snapshot()
	}
	// Snapshots are immutable, so the same pointers give the same catalog.
	if g == cs.builtGen && slices.Equal(snaps, cs.builtSnaps) {
		return
	}
	cs.builtGen, cs.builtSnaps = g, snaps
	annTools, annResources, annPrompts := cs.announcements(g, names, snaps)
	for name := range cs.lastTools {
		if g.ups[name] == nil {
			delete(cs.lastTools, name) // removed by a reload
		}
	}
	rank := make(map[string]int, len(names))
	for i, name := range g.cfg.ServersInOrder() {
		rank[name] = i
	}
	var servers []serverTools
	var surfaces []surfaceServer
	var resourceTools []byte // which listed servers back mcp_resources and mcp_prompts
	for i, name := range names {
		cfg := g.cfg.Servers[name]
		snap := snaps[i]
		connected := snap.Listed() // connected, or within reconnect_wait of a drop
		if connected {
			cs.lastTools[name] = snap.Tools
		}
		servers = append(servers, serverTools{
			name: name, rank: rank[name], prefix: cfg.PrefixValue(), include: cfg.Tools.Include, exclude: cfg.Tools.Exclude,
			connected: connected, tools: cs.lastTools[name], overrides: g.overrides[name],
		})
		surfaces = append(surfaces, surfaceServer{
			name: name, rank: rank[name], prefix: cfg.PrefixValue(), connected: connected,
			resources:     snap.Capabilities.Resources && cfg.ResourcesEnabled(),
			prompts:       snap.Capabilities.Prompts && cfg.PromptsEnabled(),
			snapResources: snap.Resources, snapTemplates: snap.ResourceTemplates, snapPrompts: snap.Prompts,
		})
		if s := surfaces[len(surfaces)-1]; s.connected && (s.resources || s.prompts) {
			resourceTools = fmt.Appendf(resourceTools, "%s:%t:%t,", name, s.resources, s.prompts)
		}
		// An announcement is passed on for what the proxy shows of the
		// server: its tools while listed, its resources and prompts while
		// surfaced.
		if s := surfaces[len(surfaces)-1]; !connected {
			delete(annTools, name)
			delete(annResources, name)
			delete(annPrompts, name)
		} else {
			if !s.resources {
				delete(annResources, name)
			}
			if !s.prompts {
				delete(annPrompts, name)
			}
		}
	}
	byName := make(map[string]*upstream.Snapshot, len(names))
	for i, name := range names {
		byName[name] = snaps[i]
	}
	cat := rebuildCatalog(cs.style(), servers, old, cs.reviewer(g), cs.defaultOwnTools(&builtFrom{g, byName}))
	listed := cat.ListedTools()
	for i, name := range names {
		up := snaps[i].State == upstream.StateConnected
		n := 0 // what tools/list shows of the server (none while it is down)
		if up {
			n = listed[name]
		}
		cs.opts.Metrics.UpstreamState(name, up, n)
	}
	var sw []string
	cat.surface, sw = buildSurface(cs.style(), surfaces, old.surface)
	cat.warnings = append(cat.warnings, sw...)
	cs.notifySurfaceChanges(old.surface, cat.surface, annResources, annPrompts)
	for _, w := range cat.warnings {
		if !slices.Contains(old.warnings, w) {
			cs.log.Warn().Msg(w)
		}
	}
	cs.current.Store(cat)
	resourceToolsChanged := cs.resourceTools != string(resourceTools)
	cs.resourceTools = string(resourceTools)
	switch {
	case !sameListing(cat, old) || resourceToolsChanged:
		cs.sessions.broadcast("notifications/tools/list_changed", nil, nil)
	case len(annTools) > 0:
		cs.sessions.broadcast("notifications/tools/list_changed", nil, grantedAny(annTools))
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
func (cs *catalogState) defaultOwnTools(b *builtFrom) []byte {
	name := config.ImplicitAgent
	if b.g.cfg.HasAgents() {
		name = b.g.cfg.DefaultAgent
	}
	a, err := filter.Resolve(b.g.cfg, name)
	if err != nil {
		return nil
	}
	return cs.own.ownToolsJSON(&session{agent: a, state: newMemState()}, b)
}

// notifySurfaceChanges sends resources/list_changed and prompts/list_changed
// when the merged lists changed, to the sessions granted a server whose
// items changed: the others' lists did not (docs/resources.md#resources-and-prompts).
// The servers in announcedResources and announcedPrompts announced a
// change of those lists: the sessions granted them get the notification
// even when the lists are the same.
func (cs *catalogState) notifySurfaceChanges(old, cur *surface, announcedResources, announcedPrompts map[string]bool) {
	if old == nil {
		return
	}
	changed := maps.Clone(announcedResources)
	if !bytes.Equal(old.resourcesJSON, cur.resourcesJSON) || !bytes.Equal(old.templatesJSON, cur.templatesJSON) {
		maps.Copy(changed, changedServers(old.resources, cur.resources))
		maps.Copy(changed, changedServers(old.templates, cur.templates))
	}
	if len(changed) > 0 {
		cs.sessions.broadcast("notifications/resources/list_changed", nil, grantedAny(changed))
	}
	changed = maps.Clone(announcedPrompts)
	if !bytes.Equal(old.promptsJSON, cur.promptsJSON) {
		maps.Copy(changed, changedServers(old.prompts, cur.prompts))
	}
	if len(changed) > 0 {
		cs.sessions.broadcast("notifications/prompts/list_changed", nil, grantedAny(changed))
	}
}

// Catalog returns the current merged catalog.
func (cs *catalogState) Catalog() *Catalog { return cs.current.Load() }

// waitStartup blocks until every upstream has connected or failed, at most
// startup_wait after the proxy started (docs/operations.md#startup); servers that connect
// later appear through list_changed. Either way it then brings the catalog
// up to the upstreams' snapshots: the start's builds wait for its end
// (UpstreamChanged), and the last Ready may have closed before its
// snapshot arrived. Once a call has seen every upstream of the generation
// ready, the later ones return at once (every tools/list calls it).
func (cs *catalogState) waitStartup(ctx context.Context) {
	g := cs.gen()
	if g.startedUp.Load() {
		return
	}
	ready := cs.awaitReady(ctx, g) // else startup_wait is over, or ctx
	switch {
	case ctx.Err() != nil:
	case ready:
		cs.Refresh()
		g.startedUp.Store(true)
	default:
		// Later snapshots build at once (startupPending is false now), so
		// only the first wait that ran out needs to build.
		g.waitOver.Do(cs.Refresh)
	}
}

// awaitReady waits until every upstream of g is ready (true), or until
// startup_wait after the start or ctx's end (false).
func (cs *catalogState) awaitReady(ctx context.Context, g *generation) bool {
	var timer *time.Timer // made when an upstream is not ready yet
	for _, name := range g.serverNames() {
		ready := g.ups[name].Ready()
		select {
		case <-ready:
			continue
		default:
		}
		if timer == nil {
			wait := time.Until(cs.started.Add(g.cfg.StartupWait.D()))
			if wait <= 0 {
				return false
			}
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-ready:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// startupPending reports whether some upstream's first connection attempt
// is still running within startup_wait.
func (cs *catalogState) startupPending() bool {
	g := cs.gen()
	if time.Since(cs.started) >= g.cfg.StartupWait.D() {
		return false
	}
	for _, u := range g.ups {
		select {
		case <-u.Ready():
		default:
			return true
		}
	}
	return false
}

// awaitTool makes sure a tool name unknown to the catalog is not unknown
// only because the catalog lags (catchUp).
func (cs *catalogState) awaitTool(ctx context.Context, name string) {
	cs.catchUp(ctx, func(c *Catalog) bool {
		_, known := c.Lookup(name)
		return known
	})
}

// catchUp is what a request naming something the catalog does not know
// (known reports false) does before it answers "unknown": it brings the
// catalog up to the upstreams' latest snapshots (during the start their
// builds wait, UpstreamChanged; and an upstream's readiness is signalled
// before its snapshot arrives), and if the name is still unknown while
// upstreams are making their first connection (docs/operations.md#startup), it waits for
// them, at most startup_wait (a host calling a tool or prompt it
// remembers).
func (cs *catalogState) catchUp(ctx context.Context, known func(*Catalog) bool) {
	if known(cs.Catalog()) {
		return
	}
	cs.Refresh()
	if !known(cs.Catalog()) && cs.startupPending() {
		cs.waitStartup(ctx)
	}
}
