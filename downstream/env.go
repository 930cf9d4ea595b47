package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/seal"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
	"github.com/rs/zerolog"
)

// env is what every part of the proxy reads and none owns: the options it
// was built with, its log, its clock, and the current generation (the
// config and the upstreams built from it, swapped whole by a reload) with
// the scrubber of the config's secrets; and the questions about that
// generation every part asks: is a server up, what is its timeout, what
// does an upstream error say to a client, send one request to a server.
type env struct {
	opts    Options
	log     zerolog.Logger
	started time.Time
	now     func() time.Time // the rate limits' clock: time.Now, or a test's

	sealer *seal.Sealer // request states (roundstate.go)

	cur      atomic.Pointer[generation]
	scrubber atomic.Pointer[sanitize.Scrubber] // the config's secret values
}

func newEnv(opts Options) *env {
	e := &env{opts: opts, log: opts.Logger, started: time.Now(), now: time.Now, sealer: opts.StateSealer}
	if e.sealer == nil && opts.Store.Shared() {
		// Every replica derives the same key from store.encryption_key.
		e.sealer, _ = seal.New(opts.Store.Keys().Sealing()) // 32 bytes: never fails
	}
	if e.sealer == nil {
		e.sealer = seal.Random()
	}
	e.cur.Store(&generation{first: true, cfg: opts.Config, ups: opts.Upstreams, overrides: compileOverrides(opts.Config, opts.Logger),
		limits: buildLimits(opts.Config, nil, e.now(), opts.Store.Limits())})
	e.scrubber.Store(sanitize.NewScrubber(opts.Config.Secrets()))
	return e
}

// swap makes cfg and ups the current generation (a reload). The rate
// limits that did not change keep their buckets; the old config's secret
// values stay known to the scrubber: a reply may still quote one.
func (e *env) swap(cfg *config.Config, ups map[string]Upstream) {
	prev := e.gen()
	old := prev.cfg.Secrets()
	e.cur.Store(&generation{cfg: cfg, ups: ups, overrides: compileOverrides(cfg, e.log), limits: buildLimits(cfg, prev.limits, e.now(), e.opts.Store.Limits())})
	e.scrubber.Store(sanitize.NewScrubber(append(old, cfg.Secrets()...)))
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

func (e *env) gen() *generation { return e.cur.Load() }

// generations gives the current generation. A part that reads nothing else
// of env holds env as this, not the whole of it.
type generations interface {
	gen() *generation
}

func (g *generation) serverNames() []string {
	names := make([]string, 0, len(g.ups))
	for name := range g.ups {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// cleanText removes the config's secret values and the generic secret
// patterns from text of upstream origin that goes to a client (docs/protocol.md#fidelity).
func (e *env) cleanText(s string) string { return e.scrubber.Load().Text(s) }

// errText is cleanText for error texts: also cut to 500 characters.
func (e *env) errText(s string) string { return sanitize.Error(e.cleanText(s)) }

func (e *env) style() namespace.Style { return namespace.Style(e.gen().cfg.Naming) }

// hasPinned reports whether any server has pinned_resources.
func (e *env) hasPinned() bool {
	for _, s := range e.gen().cfg.Servers {
		if len(s.PinnedResources) > 0 {
			return true
		}
	}
	return false
}

// defaultAgentName is the agent served when a request names none: the
// configured default_agent, or the implicit agent when there are no agents.
// It is "" when agents exist and none is the default.
func (g *generation) defaultAgentName() string {
	if g.cfg.HasAgents() {
		return g.cfg.DefaultAgent
	}
	return config.ImplicitAgent
}

// forward sends one request upstream within the server's timeout and maps
// its error like a tool call's.
func (e *env) forward(ctx context.Context, r *request, srv string, up Upstream, method string, params json.RawMessage) (json.RawMessage, *wireError) {
	cfg := e.gen().cfg.Servers[srv]
	timeout := 120 * time.Second
	if cfg != nil {
		timeout = cfg.Timeout.D()
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if hop, err := hopParams(params); err == nil {
		params = hop
	}
	res, err := up.Request(withRequest(cctx, r), method, params)
	if r != nil && r.missingError() != nil {
		return nil, r.missingError() // the server asked for what the 2026-07-28 client did not declare
	}
	if err == nil {
		return res, nil
	}
	var rpc *upstream.RPCError
	switch {
	case ctx.Err() != nil:
		return nil, &wireError{Code: codeServerError, Message: "request cancelled"}
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return nil, &wireError{Code: codeTimeout, Message: "MCP server '" + srv + "' did not answer " + method + " within " + timeout.String()}
	case errors.As(err, &rpc):
		return nil, &wireError{Code: rpc.Code, Message: e.errText(rpc.Message), Data: e.errorData(rpc.Data)}
	case invalidResult(err):
		return nil, errorf(codeInternal, "%s", e.errText(err.Error()))
	case errors.Is(err, upstream.ErrNeedsAuth):
		return nil, needsAuth(srv, e.errText(err.Error()))
	case errors.Is(err, upstream.ErrNotConnected):
		return nil, e.notSent(srv, err)
	}
	return nil, &wireError{Code: codeServerError, Message: e.errText("MCP server '" + srv + "': " + err.Error())}
}

// serverTimeout is a server's configured timeout (120 s when unknown).
func (e *env) serverTimeout(srv string) time.Duration {
	if cfg := e.gen().cfg.Servers[srv]; cfg != nil {
		return cfg.Timeout.D()
	}
	return 120 * time.Second
}

// idleTimeout is listen.session_idle_timeout; 0 keeps idle sessions.
func (e *env) idleTimeout() time.Duration {
	if d := e.gen().cfg.Listen.SessionIdleTimeout; d != nil {
		return d.D()
	}
	return config.DefaultSessionIdleTimeout
}

// serverUp is nil when the server takes requests (connected, or a request
// for it waits for its connection: upstream.Snapshot.Available), else the
// error to send: it needs an OAuth login (naming the command that does it),
// or it is not connected (saying why and when the next attempt starts).
func (e *env) serverUp(server string) *wireError {
	g := e.gen()
	up, cfg := g.ups[server], g.cfg.Servers[server]
	if up == nil || cfg == nil {
		return e.serverDown(server, up)
	}
	switch snap := up.Snapshot(); {
	case snap.Available():
		return nil
	case snap.State == upstream.StateNeedsAuth && snap.Err != nil:
		return needsAuth(server, e.errText(snap.Err.Error()))
	}
	return e.serverDown(server, up)
}

// needsAuth is the error of a request to a server that needs an OAuth
// login; why names the command that does it.
func needsAuth(server, why string) *wireError {
	return errorf(codeServerError, "MCP server '%s' needs authorization: %s", server, why)
}

// invalidResult reports whether err is an upstream's answer with a result
// that is not a JSON object: what the upstream broke is the proxy's
// internal error to its client (-32603), which names the server, never a
// result a strict client would refuse.
func invalidResult(err error) bool {
	var invalid *upstream.InvalidResultError
	return errors.As(err, &invalid)
}

// maxErrorData bounds the upstream error data passed downstream.
const maxErrorData = 64 << 10

// errorData is an upstream error's data as it may go downstream: sanitized
// like every error text (docs/protocol.md#errors); dropped when too large or when
// sanitizing left it invalid. Clients act on it (URL elicitation, -32042,
// carries its elicitations there).
func (e *env) errorData(data json.RawMessage) json.RawMessage {
	if len(data) == 0 || len(data) > maxErrorData {
		return nil
	}
	clean := json.RawMessage(e.cleanText(string(data)))
	if !json.Valid(clean) {
		return nil
	}
	return clean
}

func notConnected(server string) *wireError {
	return &wireError{Code: codeServerError, Message: fmt.Sprintf("MCP server '%s' is not connected", server)}
}

// serverDown is the error of a request for a server whose snapshot says it
// would be refused at once (upstream.Snapshot.Available): why, and when the
// next attempt starts.
func (e *env) serverDown(server string, up Upstream) *wireError {
	if up == nil {
		return notConnected(server)
	}
	if de := up.Snapshot().DownError(); de != nil {
		de.Server = server // a fresh value: the snapshot of a fake may not name it
		return e.notSent(server, de)
	}
	return notConnected(server)
}

// notSent is the error of a request the upstream refused without sending
// it (err matches upstream.ErrNotConnected): the *upstream.DownError's text,
// which says why and when the next attempt starts.
func (e *env) notSent(server string, err error) *wireError {
	var de *upstream.DownError
	if errors.As(err, &de) {
		return &wireError{Code: codeServerError, Message: e.errText(de.Error())}
	}
	return notConnected(server)
}

// serverInfo is the proxy's serverInfo object.
func (e *env) serverInfo() []byte {
	return []byte(`{"name":"mcp-proxy","version":` + string(rawjson.String(e.opts.Version)) + `}`)
}
