package downstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/audit"
	"github.com/mcp-proxy/mcp-proxy/blobs"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/internal/seal"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/store"
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
	// Store holds the state shared by replicas (docs/shared-state.md); nil
	// is the memory store: everything stays in this process.
	Store *store.Store
	// StateSealer seals the request states of multi-round-trip requests
	// (docs/protocol.md#requests-from-servers); nil: with a shared Store, the
	// key every replica derives from store.encryption_key, else a random key
	// of this process (states then open in this process only). Processes
	// that must take each other's retries are given sealers with one key.
	StateSealer *seal.Sealer
}

// Proxy is the downstream MCP server, and the composition root of its
// parts: New builds them and wires them together, and its methods hand
// each call to the part that serves it. Each part owns its state and its
// behaviour, and reaches the others through small interfaces it declares
// (docs/architecture.md has the picture):
//
//   - env (env.go): the options, the log, the current generation (config
//     and upstreams) and the questions every part asks of it;
//   - the transports, which only frame bytes: stdioFront (stdio.go) and
//     httpFront (http.go, httpstream.go);
//   - the route, router (route.go): receive, split, parse, the method and
//     notification tables behind one middleware chain;
//   - the session table, sessionTable (sessiontable.go), and each
//     session's state behind sessionState (sessionstate.go);
//   - the handshake, lifecycle (lifecycle.go);
//   - the tool calls, toolCalls (toolcall.go, with its steps in
//     approval.go, limits.go, overrides.go);
//   - the resources and prompts, resourcesPrompts (resources.go, listen.go);
//   - the own tools, ownTools (owntools_search.go, owntools_resources.go);
//   - the views per agent, viewCache (views.go);
//   - the relay of servers' requests and notifications, relay (relay.go,
//     roundtrip.go, progress.go, loglevel.go);
//   - the catalog, catalogState (catalogstate.go, catalog.go, surface.go);
//   - the OAuth logins through the host, logins (authurl.go).
//
// Its methods are safe for concurrent use.
type Proxy struct {
	*env

	route     *router
	sessions  *sessionTable
	catalogs  *catalogState
	views     *viewCache
	own       *ownTools
	relay     *relay
	surface   *resourcesPrompts
	calls     *toolCalls
	lifecycle *lifecycle
	logins    *logins
	stdio     *stdioFront
	front     *httpFront
}

// New builds the proxy. It does not start serving; see ServeStdio and
// HTTPHandler.
func New(opts Options) *Proxy {
	e := newEnv(opts)
	p := &Proxy{env: e}
	p.sessions = newSessionTable(opts.Metrics)
	p.route = newRouter(e)
	p.own = &ownTools{env: e}
	p.catalogs = newCatalogState(e, p.sessions, p.own)
	p.views = newViewCache(e, p.catalogs, p.own)
	p.logins = &logins{gens: e, log: e.log, sessions: p.sessions}
	if ss := opts.Store.Sessions(e.idleTimeout()); ss != nil {
		p.sessions.shared = &sharedSessions{store: ss, resolve: p.views.resolveAgent, log: opts.Logger}
	}
	p.front = newHTTPFront(e, p.route, p.sessions, p.views)
	p.stdio = &stdioFront{route: p.route, sessions: p.sessions, agents: p.views}
	p.surface = &resourcesPrompts{env: e, catalog: p.catalogs, sessions: p.sessions, stop: p.front.stop}
	p.relay = newRelay(e, p.sessions, p.surface)
	tasks := newTaskTable(nil)
	p.relay.tasks = tasks
	p.surface.relay = p.relay
	if opts.Store != nil && opts.Store.Shared() {
		e.cross = newCrossReplica(e, opts.Store)
		e.cross.relay = p.relay
		p.sessions.cross = e.cross
	}
	p.calls = newToolCalls(e, p.catalogs, p.views, p.own, p.relay, p.route.decorateResult)
	p.calls.tasks = tasks
	p.own.catalog, p.own.views, p.own.calls = p.catalogs, p.views, p.calls
	if p.sessions.shared != nil {
		p.sessions.prepay = p.calls.prepay
		p.sessions.relevel = func(ctx context.Context) {
			p.relay.applyLogLevels()
			ctx, cancel := context.WithTimeout(ctx, levelSendTimeout)
			defer cancel()
			p.relay.levels.waitSent(ctx)
		}
	}
	p.lifecycle = &lifecycle{generations: e, serverInfo: e.serverInfo(), catalog: p.catalogs, own: p.own, logins: p.logins, levels: p.relay}
	p.route.serve(methodTable(p.lifecycle, p.calls, p.surface), notificationTable(p.relay))
	// When a session ends, its subscriptions go, and the upstreams' log
	// levels no longer count its own.
	p.sessions.onRemove = func(s *session) {
		p.surface.dropSubscriptions(s)
		tasks.forget(s)
		if s.state.Level() >= 0 {
			p.relay.applyLogLevels()
		}
	}
	return p
}

// Reload switches the proxy to a new config and upstream set (docs/operations.md#shutdown-and-reload:
// SIGHUP). Sessions keep the grants they started with (and their log
// levels, which the new connections are told); new sessions resolve their
// agent from cfg. The listen settings of the old config stay in force.
func (p *Proxy) Reload(cfg *config.Config, ups map[string]Upstream) {
	p.swap(cfg, ups)
	p.views.reset()
	p.front.reload(cfg)
	p.relay.applyLogLevels() // an added or restarted server's connection has no level yet
	p.catalogs.Refresh()
}

// ServeStdio serves one session for agent ("" = the default agent) on
// in/out until in reaches EOF or ctx ends, with the session's per-call
// allow-list perCall (nil = none). Only protocol messages are written to
// out. An unknown agent is an error wrapping filter.ErrUnknownAgent
// (stdio.go).
func (p *Proxy) ServeStdio(ctx context.Context, agent string, perCall []string, in io.Reader, out io.Writer) error {
	return p.stdio.serve(ctx, agent, perCall, in, out)
}

// HTTPHandler returns the Streamable HTTP handler of a listener bound to
// boundAddr (host:port; it makes the default public URL), and starts the
// sweep of idle sessions, which ShutdownHTTP stops (http.go).
func (p *Proxy) HTTPHandler(boundAddr string) http.Handler { return p.front.handler(boundAddr) }

// ShutdownHTTP ends the HTTP side gracefully (http.go). Call it after
// http.Server.Shutdown has stopped new requests.
func (p *Proxy) ShutdownHTTP(ctx context.Context) { p.front.shutdown(ctx) }

// Health returns the /healthz and /readyz handlers for the metrics listener.
func (p *Proxy) Health() (healthz, readyz http.HandlerFunc) { return p.front.healthz, p.front.readyz }

// CallTool calls one tool for agent outside any MCP session (the `call`
// verb). It takes the route of a tools/call from a client, middleware and
// all, as a client that can be asked nothing.
func (p *Proxy) CallTool(ctx context.Context, agent string, perCall []string, name string, args json.RawMessage) (json.RawMessage, error) {
	a, err := p.views.resolveAgent(agent)
	if err != nil {
		return nil, err
	}
	params, err := callParams(name, args, nil)
	if err != nil {
		return nil, err
	}
	s := newSession("", "cli", a, perCall)
	defer s.close()
	r := &request{sess: s, id: json.RawMessage("0"), method: "tools/call", params: params, out: noStream{}}
	result, werr := p.route.call(ctx, r)
	if werr != nil {
		return nil, werr
	}
	return result, nil
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

// AskToOpen asks the stdio client to open the authorization page of
// server's login at url (authurl.go). It is
// upstream.AuthOptions.OnAuthorizationURL, for stdio only.
func (p *Proxy) AskToOpen(server, url string) { p.logins.AskToOpen(server, url) }

// Catalog returns the current merged catalog.
func (p *Proxy) Catalog() *Catalog { return p.catalogs.Catalog() }

// Refresh rebuilds the catalog from the upstreams' snapshots and tells the
// sessions what changed (catalogstate.go).
func (p *Proxy) Refresh() { p.catalogs.Refresh() }

// UpstreamChanged is Refresh for a new upstream snapshot (catalogstate.go).
func (p *Proxy) UpstreamChanged() { p.catalogs.UpstreamChanged() }

// Reevaluate rebuilds the catalog although no upstream changed: tool
// integrity's verdicts did (an approval made by another process).
func (p *Proxy) Reevaluate() { p.catalogs.Reevaluate() }

// IntegrityTools is what tool integrity reviews of a server's tools, as a
// catalog build gives them (overrides.go). The `tools` verb reviews
// through it so that it judges what the proxy serves.
func (p *Proxy) IntegrityTools(server string, tools []upstream.Tool) []integrity.Tool {
	return p.integrityTools(server, tools)
}
