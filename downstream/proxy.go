package downstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/blobs"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Upstream is what the proxy needs of one upstream connection.
type Upstream interface {
	Snapshot() *upstream.Snapshot
	// Ready is closed once the first connection attempt has ended.
	Ready() <-chan struct{}
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// Options configures a Proxy. Config and Upstreams are required.
type Options struct {
	Config *config.Config
	// Upstreams holds one connection per enabled server, by server name.
	Upstreams map[string]Upstream
	Logger    zerolog.Logger
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Blobs rewrites embedded blobs in tool results; nil passes them through.
	Blobs *blobs.Materializer
	// Version is reported as serverInfo.version.
	Version string
	// ApprovalTimeout bounds an approval question; 0 means 300 s (SPEC §5).
	ApprovalTimeout time.Duration
}

// Proxy is the downstream MCP server. Its methods are safe for concurrent use.
type Proxy struct {
	opts    Options
	log     zerolog.Logger
	mcp     *server.MCPServer
	slots   slotTable
	catalog atomic.Pointer[Catalog]
	started time.Time

	cur       atomic.Pointer[generation]
	scrubber  atomic.Pointer[sanitize.Scrubber] // the config's secret values
	mu        sync.Mutex                        // serializes Refresh
	lastTools map[string][]upstream.Tool
	shadowed  map[string]struct{} // names registered with mcp-go (syncShadows)
	// built is what the current catalog was built from: Refresh has nothing
	// to do while the generation and every snapshot are the same.
	builtGen   *generation
	builtSnaps []*upstream.Snapshot
	// refreshCalls counts Refresh calls; refreshCovered (guarded by mu) is
	// the count when the last build began reading snapshots. A call waiting
	// for mu whose number is covered has been served by that build.
	refreshCalls   atomic.Uint64
	refreshCovered uint64

	httpMu       sync.Mutex
	httpServers  []*server.StreamableHTTPServer
	httpSessions *sessionRegistry
	httpCalls    atomic.Int64 // POSTs being served

	agentsMu sync.Mutex
	agents   map[string]*filter.Agent // resolved agents of the current config
	states   sync.Map                 // session id -> *sessionState
	viewsMu  sync.Mutex
	views    map[viewKey]*view

	subs         subscriptions // resource subscriptions, per server and URI
	ids          atomic.Uint64 // surrogate request ids (front.go)
	roundTripKey [32]byte      // signs approval round trips (approval.go)
	parked       parkTable     // calls of stateless clients between round trips (mrtr.go)
	calls        callRegistry  // tool calls in flight, per server and session
	progress     progressRelay // progress tokens of calls in flight
	samplingRate rateWindow    // sampling requests per server, last minute
}

// New builds the proxy. It does not start serving; see ServeStdio and
// HTTPHandler.
func New(opts Options) *Proxy {
	p := &Proxy{opts: opts, log: opts.Logger, started: time.Now(), lastTools: map[string][]upstream.Tool{},
		agents: map[string]*filter.Agent{}, views: map[viewKey]*view{}}
	p.slots.m = map[string]*slot{}
	p.progress.p = p
	_, _ = rand.Read(p.roundTripKey[:]) // crypto/rand.Read never fails on supported platforms
	p.cur.Store(&generation{cfg: opts.Config, ups: opts.Upstreams})
	p.scrubber.Store(sanitize.NewScrubber(opts.Config.Secrets()))
	empty := buildCatalog(p.style(), nil)
	empty.surface, _ = buildSurface(p.style(), nil)
	p.catalog.Store(empty)

	hooks := &server.Hooks{}
	hooks.AddBeforeListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest) { p.waitStartup(ctx) })
	hooks.AddOnSuccess(func(ctx context.Context, _ any, method mcp.MCPMethod, _ any, _ any) {
		p.opts.Metrics.Request(agentFrom(ctx), string(method), "ok")
	})
	hooks.AddOnError(func(ctx context.Context, _ any, method mcp.MCPMethod, _ any, _ error) {
		p.opts.Metrics.Request(agentFrom(ctx), string(method), "error")
	})
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
		s := server.ClientSessionFromContext(ctx)
		if s == nil {
			return
		}
		if transportOf(s) == "http" {
			p.registerState(ctx, req.Header)
		}
		st, err := p.stateFor(ctx, s.SessionID(), req.Header)
		if err != nil || !p.needsInstructions(st) {
			return
		}
		p.waitStartup(ctx)
		res.Instructions = p.sessionInstructions(ctx, st)
	})
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		p.opts.Metrics.SessionOpened(agentFrom(ctx), transportOf(s))
		if v, ok := p.states.Load(s.SessionID()); ok && transportOf(s) == "stdio" {
			v.(*sessionState).setSession(s)
		}
	})
	hooks.AddAfterSetLevel(func(_ context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
		p.fanOutLogLevel(req.Params.Level)
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) {
		p.opts.Metrics.SessionClosed(agentFrom(ctx), transportOf(s))
		if v, ok := p.states.Load(s.SessionID()); ok {
			p.dropSubscriptions(v.(*sessionState))
		}
		if s.SessionID() != "stdio" {
			p.states.Delete(s.SessionID())
		}
	})
	p.mcp = server.NewMCPServer("mcp-proxy", opts.Version,
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithCompletions(),
		server.WithLogging(),
		// Server requests (relayed sampling, elicitation, roots) still reach
		// a 2026-07-28 client on stdio, which is bidirectional; relay.go
		// refuses them for stateless HTTP clients.
		server.WithLegacyServerInitiatedRequests(),
		server.WithHooks(hooks),
		server.WithRecovery(),
	)
	return p
}

// generation is one config and the upstreams built from it. A reload
// (SIGHUP) swaps it whole, so a reader never mixes two configs.
type generation struct {
	cfg *config.Config
	ups map[string]Upstream
}

func (p *Proxy) gen() *generation { return p.cur.Load() }

// Reload switches the proxy to a new config and upstream set (SPEC §3:
// SIGHUP). Sessions keep the grants they started with; new sessions resolve
// their agent from cfg. The listen settings of the old config stay in force.
func (p *Proxy) Reload(cfg *config.Config, ups map[string]Upstream) {
	old := p.gen().cfg.Secrets()
	p.cur.Store(&generation{cfg: cfg, ups: ups})
	// The old values stay known: a reply may still quote one.
	p.scrubber.Store(sanitize.NewScrubber(append(old, cfg.Secrets()...)))
	p.agentsMu.Lock()
	p.agents = map[string]*filter.Agent{}
	p.agentsMu.Unlock()
	p.viewsMu.Lock()
	p.views = map[viewKey]*view{} // views of the old agents go with them
	p.viewsMu.Unlock()
	p.Refresh()
}

// cleanText removes the config's secret values and the generic secret
// patterns from text of upstream origin that goes to a client (SPEC §9.4).
func (p *Proxy) cleanText(s string) string { return p.scrubber.Load().Text(s) }

// errText is cleanText for error texts: also cut to 500 characters.
func (p *Proxy) errText(s string) string { return sanitize.Error(p.cleanText(s)) }

func (p *Proxy) style() namespace.Style { return namespace.Style(p.gen().cfg.Naming) }

// Catalog returns the current merged catalog.
func (p *Proxy) Catalog() *Catalog { return p.catalog.Load() }

// Refresh rebuilds the catalog from the upstreams' current snapshots and, when
// the listed tools changed, updates mcp-go's registry, which sends one
// notifications/tools/list_changed to every initialized session. It is called
// after every upstream snapshot and is cheap when nothing changed. Calls
// that pile up while a build runs are served by one build that starts after
// all of them (20 upstreams connecting at once make a handful of builds,
// not 20). When Refresh returns, a build that began after the call has
// finished.
func (p *Proxy) Refresh() {
	call := p.refreshCalls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refreshCovered >= call {
		return
	}
	p.refreshCovered = p.refreshCalls.Load()
	old := p.catalog.Load()
	g := p.gen()
	names := g.serverNames()
	snaps := make([]*upstream.Snapshot, len(names))
	for i, name := range names {
		snaps[i] = g.ups[name].Snapshot()
	}
	// Snapshots are immutable, so the same pointers give the same catalog.
	// tools/list calls Refresh (waitStartup): this keeps it cheap.
	if g == p.builtGen && slices.Equal(snaps, p.builtSnaps) {
		return
	}
	p.builtGen, p.builtSnaps = g, snaps
	var servers []serverTools
	var surfaces []surfaceServer
	for name := range p.lastTools {
		if g.ups[name] == nil {
			delete(p.lastTools, name) // removed by a reload
		}
	}
	for i, name := range names {
		cfg := g.cfg.Servers[name]
		snap := snaps[i]
		connected := snap.Listed() // connected, or within reconnect_wait of a drop
		if connected {
			p.lastTools[name] = snap.Tools
		}
		servers = append(servers, serverTools{
			name: name, prefix: cfg.PrefixValue(), include: cfg.Tools.Include, exclude: cfg.Tools.Exclude,
			connected: connected, tools: p.lastTools[name],
		})
		surfaces = append(surfaces, surfaceServer{
			name: name, prefix: cfg.PrefixValue(), connected: connected,
			resources:     snap.Capabilities.Resources && cfg.ResourcesEnabled(),
			prompts:       snap.Capabilities.Prompts && cfg.PromptsEnabled(),
			snapResources: snap.Resources, snapTemplates: snap.ResourceTemplates, snapPrompts: snap.Prompts,
		})
		up, n := snap.State == upstream.StateConnected, 0 // n: the server's tools after tools.include/exclude
		for _, t := range snap.Tools {
			if up && filter.ServerTool(cfg.Tools.Include, cfg.Tools.Exclude, t.Name) {
				n++
			}
		}
		p.opts.Metrics.UpstreamState(name, up, n)
	}
	c := rebuildCatalog(p.style(), servers, old)
	var sw []string
	c.surface, sw = buildSurface(p.style(), surfaces)
	c.warnings = append(c.warnings, sw...)
	p.notifySurfaceChanges(old.surface, c.surface)
	if sameListing(c, old) {
		p.catalog.Store(c) // routes may differ in connectivity only
		return
	}
	for _, w := range c.warnings {
		if !slices.Contains(old.warnings, w) {
			p.log.Warn().Msg(w)
		}
	}
	p.catalog.Store(c)
	p.syncShadows(c)
}

// syncShadows registers one small tool per exposed name with mcp-go (mcp-go
// dispatches tools/call by name; the listed bytes come from the catalog, see
// front.go). It is called when the listed tools changed, and mcp-go's
// registration sends each initialized session one
// notifications/tools/list_changed: names that only came add their shadows
// (AddTools), a name that went replaces the set (SetTools), and with the
// same names (a server went down or came back) only the notification is
// sent. mcp-go checks each tool it registers, so a cold start whose catalog
// grows server by server registers each name once.
func (p *Proxy) syncShadows(c *Catalog) {
	names := make(map[string]struct{}, len(c.tools)+len(ownToolNames))
	for _, e := range c.tools {
		// The last known tools of a server that is down stay registered, so
		// that calling one says the server is not connected instead of
		// "unknown tool"; they are not listed (front.go lists the catalog).
		names[e.Exposed] = struct{}{}
	}
	// The own tools are registered always; the handler decides per session
	// whether they are offered (deferred.go). An upstream tool exposed under
	// one of their names has the same shadow.
	for _, own := range ownToolNames {
		names[own] = struct{}{}
	}
	removed := false
	for name := range p.shadowed {
		if _, ok := names[name]; !ok {
			removed = true
			break
		}
	}
	handler := server.ToolHandlerFunc(p.callTool) // one method value for all
	var added []server.ServerTool
	for name := range names {
		if _, ok := p.shadowed[name]; !ok || removed {
			added = append(added, server.ServerTool{Tool: mcp.NewToolWithRawSchema(name, "", shadowSchema), Handler: handler})
		}
	}
	p.shadowed = names
	switch {
	case removed:
		p.mcp.SetTools(added...)
	case len(added) > 0:
		p.mcp.AddTools(added...)
	default:
		p.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationToolsListChanged), nil)
	}
}

// ownToolNames are the proxy's own tools, registered with mcp-go always.
var ownToolNames = []string{toolSearchName, callToolName, mcpResourcesName, mcpPromptsName}

// shadowSchema is the input schema of the tools registered with mcp-go. It is
// never shown to a client: tools/list responses carry the upstream's schema.
var shadowSchema = json.RawMessage(`{"type":"object"}`)

func (g *generation) serverNames() []string {
	names := make([]string, 0, len(g.ups))
	for name := range g.ups {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// waitStartup blocks a session's tools/list until every upstream has
// connected or failed, at most startup_wait after the proxy started (SPEC
// §3); servers that connect later appear through list_changed.
func (p *Proxy) waitStartup(ctx context.Context) {
	g := p.gen()
	deadline := p.started.Add(g.cfg.StartupWait.D())
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, name := range g.serverNames() {
		select {
		case <-g.ups[name].Ready():
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
	// The last Ready may have closed before its snapshot reached Refresh.
	p.Refresh()
}

// startupPending reports whether some upstream's first connection attempt
// is still running within startup_wait.
func (p *Proxy) startupPending() bool {
	g := p.gen()
	if time.Since(p.started) >= g.cfg.StartupWait.D() {
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

// needsInstructions reports whether a session's initialize (or
// server/discover) result carries instructions of the proxy's own: the
// deferred tools and the pinned resources. They are the model's only list
// of deferred tools, so such a session's first answer waits for upstreams
// (at most startup_wait).
func (p *Proxy) needsInstructions(st *sessionState) bool {
	return st.agent.Deferred || p.hasPinned()
}

// sessionInstructions renders those instructions.
func (p *Proxy) sessionInstructions(ctx context.Context, st *sessionState) string {
	var parts []string
	if st.agent.Deferred {
		parts = append(parts, p.deferredInstructions(st))
	}
	if pinned := p.pinnedInstructions(ctx, st); pinned != "" {
		parts = append(parts, pinned)
	}
	return strings.Join(parts, "\n")
}

// hasPinned reports whether any server has pinned_resources.
func (p *Proxy) hasPinned() bool {
	for _, s := range p.gen().cfg.Servers {
		if len(s.PinnedResources) > 0 {
			return true
		}
	}
	return false
}

// WaitStartup is waitStartup for the CLI verbs that list or call once.
func (p *Proxy) WaitStartup(ctx context.Context) { p.waitStartup(ctx) }

type agentKey struct{}

// agentFrom returns the agent a request belongs to.
func agentFrom(ctx context.Context) string {
	if a, ok := ctx.Value(agentKey{}).(string); ok {
		return a
	}
	return defaultAgent
}

// defaultAgent is the implicit agent of a config without `agents` (SPEC §5).
const defaultAgent = "default"

func transportOf(s server.ClientSession) string {
	if s.SessionID() == "stdio" {
		return "stdio"
	}
	return "http"
}
