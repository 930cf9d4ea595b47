package downstream

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/audit"
	"github.com/mcp-proxy/mcp-proxy/blobs"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/tracing"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Upstream is what the proxy needs of one upstream connection.
type Upstream interface {
	Snapshot() *upstream.Snapshot
	// Ready is closed once the first connection attempt has ended.
	Ready() <-chan struct{}
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// SetLogLevel keeps the log level the server is to send at and applies
	// it now and on every later connection.
	SetLogLevel(ctx context.Context, level string) error
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
	// ApprovalTimeout bounds an approval question; 0 means 300 s (docs/agents.md#approval).
	ApprovalTimeout time.Duration
	// Integrity pins and scans tool definitions (docs/security.md#tool-integrity); nil: none.
	Integrity *integrity.Guard
	// Tracer traces requests (docs/operations.md#traces); nil: tracing off, at no cost.
	Tracer *tracing.Tracer
	// Audit writes one line per decision (docs/operations.md#audit-log); nil: none.
	Audit *audit.Log
}

// Proxy is the downstream MCP server. Its methods are safe for concurrent
// use. Its state lives in parts that own it: the catalog (catalog.go,
// refresh.go), the sessions (sessions.go), the HTTP front (http.go), the
// views per agent (views.go), the relay of upstream requests and
// notifications (relay.go, progress.go, mrtr.go) and the approval states
// of stateless clients (approval.go).
type Proxy struct {
	opts    Options
	log     zerolog.Logger
	started time.Time
	now     func() time.Time // the rate limits' clock: time.Now, or a test's

	cur      atomic.Pointer[generation]
	scrubber atomic.Pointer[sanitize.Scrubber] // the config's secret values

	route     map[string]handler // the method table behind its middleware
	callChain callHandler        // the steps of a tools/call (toolcall.go)
	catalogs  catalogState
	views     viewCache
	sessions  *sessionStore
	front     *httpFront
	relay     relay
	approvals approvalStates
	logins    logins
}

// New builds the proxy. It does not start serving; see ServeStdio and
// HTTPHandler.
func New(opts Options) *Proxy {
	p := &Proxy{opts: opts, log: opts.Logger, started: time.Now(), now: time.Now}
	p.cur.Store(&generation{first: true, cfg: opts.Config, ups: opts.Upstreams, overrides: compileOverrides(opts.Config, opts.Logger),
		limits: buildLimits(opts.Config, nil, p.now())})
	p.scrubber.Store(sanitize.NewScrubber(opts.Config.Secrets()))
	p.catalogs.init(p.style())
	p.views.reset()
	p.relay.init(p)
	p.sessions = newSessionStore(opts.Metrics)
	p.sessions.onRemove = p.sessionEnded
	p.front = newHTTPFront(p)
	p.route = buildRoute(p.methodTable(), p.recovery, p.traceRequest, p.observe, eraCheck, p.decorate)
	p.callChain = buildCallChain(p.send, p.observeCall, p.policyGate, p.quarantineGate, p.pinnedGate, p.upGate, p.rateGate, p.approvalGate)
	return p
}

// generation is one config and the upstreams built from it. A reload
// (SIGHUP) swaps it whole, so a reader never mixes two configs.
type generation struct {
	cfg *config.Config
	ups map[string]Upstream
	// overrides are cfg's tools.overrides, compiled (docs/agents.md#overrides-and-rate-limits).
	overrides toolOverrides
	// limits are cfg's rate limits (docs/agents.md#overrides-and-rate-limits); nil when it has none.
	limits *callLimits
	// startedUp is set once a waitStartup found every upstream of ups past
	// its first connection attempt and refreshed the catalog after it: the
	// waits of later lists return at once. A reload's generation starts
	// without it. waitOver refreshes the catalog once when startup_wait
	// ran out before that.
	startedUp atomic.Bool
	waitOver  sync.Once
	// first is the generation the proxy started with: only its snapshots
	// wait for the start to end before they build (UpstreamChanged), and
	// watchStart starts the wait that builds when it ends.
	first      bool
	watchStart sync.Once
}

func (p *Proxy) gen() *generation { return p.cur.Load() }

func (g *generation) serverNames() []string {
	names := make([]string, 0, len(g.ups))
	for name := range g.ups {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Reload switches the proxy to a new config and upstream set (docs/operations.md#shutdown-and-reload:
// SIGHUP). Sessions keep the grants they started with (and their log
// levels, which the new connections are told); new sessions resolve their
// agent from cfg. The listen settings of the old config stay in force.
func (p *Proxy) Reload(cfg *config.Config, ups map[string]Upstream) {
	prev := p.gen()
	old := prev.cfg.Secrets()
	p.cur.Store(&generation{cfg: cfg, ups: ups, overrides: compileOverrides(cfg, p.log), limits: buildLimits(cfg, prev.limits, p.now())})
	// The old values stay known: a reply may still quote one.
	p.scrubber.Store(sanitize.NewScrubber(append(old, cfg.Secrets()...)))
	p.views.reset()
	if p.front.auth.Load() != nil {
		p.front.auth.Store(p.newAuthenticator(cfg)) // new tokens and match rules serve new requests
	}
	p.applyLogLevels() // an added or restarted server's connection has no level yet
	p.Refresh()
}

// sessionEnded is what the proxy does when a session ends: its
// subscriptions go, and the upstreams' log levels no longer count its own.
func (p *Proxy) sessionEnded(s *session) {
	p.dropSubscriptions(s)
	if s.level.Load() >= 0 {
		p.applyLogLevels()
	}
}

// cleanText removes the config's secret values and the generic secret
// patterns from text of upstream origin that goes to a client (docs/protocol.md#fidelity).
func (p *Proxy) cleanText(s string) string { return p.scrubber.Load().Text(s) }

// errText is cleanText for error texts: also cut to 500 characters.
func (p *Proxy) errText(s string) string { return sanitize.Error(p.cleanText(s)) }

func (p *Proxy) style() namespace.Style { return namespace.Style(p.gen().cfg.Naming) }

// Catalog returns the current merged catalog.
func (p *Proxy) Catalog() *Catalog { return p.catalogs.current.Load() }

// waitStartup blocks until every upstream has connected or failed, at most
// startup_wait after the proxy started (docs/operations.md#startup); servers that connect
// later appear through list_changed. Either way it then brings the catalog
// up to the upstreams' snapshots: the start's builds wait for its end
// (UpstreamChanged), and the last Ready may have closed before its
// snapshot arrived. Once a call has seen every upstream of the generation
// ready, the later ones return at once (every tools/list calls it).
func (p *Proxy) waitStartup(ctx context.Context) {
	g := p.gen()
	if g.startedUp.Load() {
		return
	}
	ready := p.awaitReady(ctx, g) // else startup_wait is over, or ctx
	switch {
	case ctx.Err() != nil:
	case ready:
		p.Refresh()
		g.startedUp.Store(true)
	default:
		// Later snapshots build at once (startupPending is false now), so
		// only the first wait that ran out needs to build.
		g.waitOver.Do(p.Refresh)
	}
}

// awaitReady waits until every upstream of g is ready (true), or until
// startup_wait after the start or ctx's end (false).
func (p *Proxy) awaitReady(ctx context.Context, g *generation) bool {
	var timer *time.Timer // made when an upstream is not ready yet
	for _, name := range g.serverNames() {
		ready := g.ups[name].Ready()
		select {
		case <-ready:
			continue
		default:
		}
		if timer == nil {
			wait := time.Until(p.started.Add(g.cfg.StartupWait.D()))
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
func (p *Proxy) needsInstructions(s *session) bool {
	return s.agent.Deferred || p.hasPinned()
}

// sessionInstructions renders those instructions.
func (p *Proxy) sessionInstructions(ctx context.Context, s *session) string {
	var parts []string
	if s.agent.Deferred {
		parts = append(parts, p.deferredInstructions(s))
	}
	if pinned := p.pinnedInstructions(ctx, s); pinned != "" {
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

// defaultAgentName is the agent served when a request names none: the
// configured default_agent, or the implicit agent when there are no agents.
// It is "" when agents exist and none is the default.
func (p *Proxy) defaultAgentName() string {
	if cfg := p.gen().cfg; cfg.HasAgents() {
		return cfg.DefaultAgent
	}
	return config.ImplicitAgent
}

// broadcast sends a notification to every initialized session on its own
// stream (stdio, or the HTTP session's GET stream). keep, when not nil,
// picks the sessions.
func (p *Proxy) broadcast(method string, params []byte, keep func(*session) bool) {
	msg := notification(method, params)
	p.sessions.each(func(s *session) {
		if !s.open.Load() || keep != nil && !keep(s) {
			return
		}
		s.notify.send(msg)
	})
}
