package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/audit"
	"github.com/mcp-proxy/mcp-proxy/blobs"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/metrics"
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
	*env

	route     map[string]handler // the method table behind its middleware
	callChain callHandler        // the steps of a tools/call (toolcall.go)
	catalogs  catalogState
	views     viewCache
	sessions  *sessionTable
	front     *httpFront
	relay     *relay
	surface   *resourcesPrompts
	approvals approvalStates
	logins    logins
}

// New builds the proxy. It does not start serving; see ServeStdio and
// HTTPHandler.
func New(opts Options) *Proxy {
	p := &Proxy{env: &env{opts: opts, log: opts.Logger, started: time.Now(), now: time.Now}}
	p.cur.Store(&generation{first: true, cfg: opts.Config, ups: opts.Upstreams, overrides: compileOverrides(opts.Config, opts.Logger),
		limits: buildLimits(opts.Config, nil, p.now())})
	p.scrubber.Store(sanitize.NewScrubber(opts.Config.Secrets()))
	p.catalogs.init(p.style())
	p.views.reset()
	p.sessions = newSessionTable(opts.Metrics)
	p.front = newHTTPFront(p)
	p.surface = &resourcesPrompts{env: p.env, catalog: p, sessions: p.sessions, stop: p.front.stop}
	p.relay = newRelay(p.env, p.sessions, p.surface)
	p.surface.relay = p.relay
	p.sessions.onRemove = p.sessionEnded
	p.route = buildRoute(p.methodTable(), p.recovery, p.traceRequest, p.observe, eraCheck, p.decorate)
	p.callChain = buildCallChain(p.send, p.observeCall, p.policyGate, p.quarantineGate, p.pinnedGate, p.upGate, p.rateGate, p.approvalGate)
	return p
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
	p.relay.applyLogLevels() // an added or restarted server's connection has no level yet
	p.Refresh()
}

// sessionEnded is what the proxy does when a session ends: its
// subscriptions go, and the upstreams' log levels no longer count its own.
func (p *Proxy) sessionEnded(s *session) {
	p.surface.dropSubscriptions(s)
	if s.state.Level() >= 0 {
		p.relay.applyLogLevels()
	}
}

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
func (p *Proxy) sessionInstructions(ctx context.Context, r *request) string {
	s := r.sess
	var parts []string
	if s.agent.Deferred {
		parts = append(parts, p.deferredInstructions(s))
	}
	if pinned := p.pinnedInstructions(ctx, r); pinned != "" {
		parts = append(parts, pinned)
	}
	return strings.Join(parts, "\n")
}

// OnUpstreamRequest answers an upstream's sampling/createMessage,
// elicitation/create or roots/list by asking the client of the request it
// belongs to (relay.go). It is upstream.Options.OnRequest.
func (p *Proxy) OnUpstreamRequest(ctx context.Context, srv, method string, params json.RawMessage) (json.RawMessage, error) {
	return p.relay.onRequest(ctx, srv, method, params)
}

// OnUpstreamNotification relays an upstream's notifications (relay.go). It
// is upstream.Options.OnNotification.
func (p *Proxy) OnUpstreamNotification(srv, method string, params json.RawMessage) {
	p.relay.onNotification(srv, method, params)
}
