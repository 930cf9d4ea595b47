package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/audit"
	"github.com/mcp-proxy/mcp-proxy/blobs"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/downstream"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/store"
	"github.com/mcp-proxy/mcp-proxy/tracing"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// closeBudget bounds closing every upstream and ending what their processes
// left behind at shutdown (docs/operations.md#shutdown-and-reload: all within 15 s, of which in-flight
// calls may take 10).
const closeBudget = 5 * time.Second

// slowStartNotice is how long the first connections may take before the
// proxy says which servers are still starting and why that can be: a
// server that `npx` or `uvx` starts downloads its package on its first run,
// which takes tens of seconds, while a started one connects within a
// second or two. 10 s is the default startup_wait.
const slowStartNotice = 10 * time.Second

// runtime is one running set of upstream connections and the proxy in
// front of them.
type runtime struct {
	mu       sync.Mutex // guards cfg, conns and bound across reloads
	cfg      *config.Config
	bound    string // the address the MCP listener is bound to; "" before (or in stdio)
	log      zerolog.Logger
	logOut   *scrubbedOutput
	connCtx  context.Context // the lifetime of upstream connections
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	conns    map[string]*upstream.Conn
	proxy    *downstream.Proxy
	// auth is how OAuth servers are authorized: the token store under
	// <state_dir>/auth (fixed at start), and whether logins start by
	// themselves (serve).
	auth upstream.AuthOptions
	// integrity pins tool definitions and scans them (docs/security.md#tool-integrity).
	integrity *integrity.Guard
	// tracer and audit are nil when off; both are closed after the
	// upstreams, since calls finishing at shutdown still use them.
	tracer *tracing.Tracer
	audit  *audit.Log
	// store holds the state shared by replicas (docs/shared-state.md),
	// fixed at start like state_dir; closed last.
	store *store.Store
	// slowStart is when waitAll says which servers are still starting;
	// zero means slowStartNotice.
	slowStart time.Duration
	reaper    *upstream.Reaper // ends what stdio servers leave behind, at close
	// closing is set when close begins: the upstreams' closed snapshots
	// then rebuild no catalog (with 20 servers of 100 tools those builds
	// made shutdown take 30-150 ms instead of 15, for a catalog nobody
	// reads any more).
	closing atomic.Bool

	httpLimits httpLimits // of every HTTP listener; tests shorten them
}

// scrubbedOutput is the log output: stderr behind a secret scrubber that a
// reload can extend with the new config's secrets.
type scrubbedOutput struct {
	stderr  io.Writer
	mu      sync.Mutex
	secrets []string
	w       io.Writer
}

func newScrubbedOutput(stderr io.Writer, secrets []string) *scrubbedOutput {
	o := &scrubbedOutput{stderr: stderr}
	o.addSecrets(secrets)
	return o
}

// addSecrets adds secret values to scrub; the old ones stay, since earlier
// lines of a running process may be repeated (errors, retries).
func (o *scrubbedOutput) addSecrets(secrets []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.secrets = append(o.secrets, secrets...)
	o.w = sanitize.NewScrubber(o.secrets).Writer(o.stderr)
}

func (o *scrubbedOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Write(b)
}

// unscrubbed is stderr past the scrubber, in turn with the scrubbed lines:
// only for the one line that prints the status token on purpose (the
// status page's sign-in address), a token every other line has scrubbed.
func (o *scrubbedOutput) unscrubbed() io.Writer { return unscrubbedOutput{o} }

type unscrubbedOutput struct{ o *scrubbedOutput }

func (u unscrubbedOutput) Write(b []byte) (int, error) {
	u.o.mu.Lock()
	defer u.o.mu.Unlock()
	return u.o.stderr.Write(b)
}

// Every duration field of the log ("duration", "retry_in") is written as
// Go writes durations, with its unit ("1.005s", "3.2ms"), not as a bare
// number of milliseconds. zerolog's setting is process-wide; it is set once,
// before any logger exists.
func init() { zerolog.DurationFieldFormat = zerolog.DurationFormatString }

// newLogger builds the process logger: stderr only, secrets scrubbed.
func newLogger(cfg *config.Config, out io.Writer) zerolog.Logger {
	w := out
	if cfg.Log.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: time.RFC3339}
	}
	level, err := zerolog.ParseLevel(cfg.Log.Level)
	if err != nil {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

// startFor resolves the agent a verb serves when needAgent (an unknown one
// is a usage error listing the agents) and starts the runtime.
func startFor(ctx context.Context, cfg *config.Config, o options, stderr io.Writer, needAgent bool) (*runtime, *filter.Agent, error) {
	var a *filter.Agent
	if needAgent {
		var err error
		if a, err = filter.Resolve(cfg, o.agent); err != nil {
			return nil, nil, &exitError{code: exitUsage, err: err}
		}
	}
	rt, err := startRuntime(ctx, cfg, stderr, o.verb == "serve")
	return rt, a, err
}

// startRuntime connects every enabled server in the background and builds
// the proxy. It returns at once; upstreams appear as they connect. With
// interactive, a server that needs an OAuth login starts one (serve);
// otherwise it waits for `mcp-proxy auth login`.
func startRuntime(ctx context.Context, cfg *config.Config, stderr io.Writer, interactive bool) (*runtime, error) {
	out := newScrubbedOutput(stderr, cfg.Secrets())
	rt := &runtime{cfg: cfg, log: newLogger(cfg, out), logOut: out, registry: metrics.NewRegistry(), conns: map[string]*upstream.Conn{},
		httpLimits: defaultHTTPLimits}
	// The store first: tokens and pins live in it when it is Redis.
	var err error
	if rt.store, err = rt.openStore(cfg); err != nil {
		return nil, err
	}
	tokens, err := tokenStore(cfg, rt.store)
	if err != nil {
		_ = rt.store.Close()
		return nil, configErr(err)
	}
	rt.auth = upstream.AuthOptions{
		Client:      oauthclient.Options{Store: tokens, OpenerOutput: openerOutput{rt.log}},
		Interactive: interactive,
	}
	if interactive && cfg.Listen.Transport != config.TransportHTTP {
		// Over stdio the host is the person's own: it may open the
		// authorization page too (URL-mode elicitation). Never over HTTP,
		// where sessions belong to other people (docs/security.md#oauth-upstreams). The hook runs
		// after the proxy exists: connections start after it is built.
		rt.auth.OnAuthorizationURL = func(server, url string) { rt.proxy.AskToOpen(server, url) }
	}
	// Libraries that log through slog's or the log package's defaults
	// (mcp-go does in places) go through the same scrubbed zerolog output.
	slog.SetDefault(slog.New(zerolog.NewSlogHandler(rt.log.With().Str("component", "library").Logger())))
	log.SetFlags(0)
	log.SetOutput(zlogLine{rt.log})
	m, err := metrics.New(rt.registry)
	if err != nil {
		_ = rt.store.Close()
		return nil, err
	}
	rt.metrics = m
	if err := rt.openGuard(cfg); err != nil {
		_ = rt.store.Close()
		return nil, err
	}
	noteUnimported(cfg, rt.store, rt.log)
	if rt.tracer, err = tracing.New(ctx, cfg.Tracing, tracing.Options{Logger: rt.log, Version: version}); err != nil {
		_ = rt.store.Close()
		if errors.Is(err, tracing.ErrUnsupported) {
			return nil, configErr(err)
		}
		return nil, err
	}
	rt.audit, err = audit.New(cfg.Audit, audit.Options{Logger: rt.log, Secrets: cfg.Secrets(), Registerer: rt.registry})
	if err != nil {
		_ = rt.tracer.Shutdown(context.Background())
		_ = rt.store.Close()
		return nil, err
	}
	bl, err := rt.openBlobs(cfg)
	if err != nil {
		_ = rt.store.Close()
		_ = rt.audit.Close(context.Background())
		_ = rt.tracer.Shutdown(context.Background())
		return nil, err
	}
	// Before the first child starts: its orphans must come to the proxy.
	if rt.reaper, err = upstream.StartReaper(rt.log); err != nil {
		rt.log.Warn().Err(err).Msg("processes that stdio servers leave behind cannot be adopted; they may outlive the proxy")
	}
	ups := map[string]downstream.Upstream{}
	if cfg.IsEnabled() {
		for name, s := range cfg.Servers {
			if !s.IsEnabled() {
				continue
			}
			c := rt.newConn(name, s, cfg.StartupWait.D())
			rt.conns[name] = c
			ups[name] = c
		}
	} else {
		rt.log.Info().Msg("enabled: false: no upstream server is connected")
	}
	rt.proxy = downstream.New(downstream.Options{
		Config: cfg, Upstreams: ups, Logger: rt.log, Metrics: m, Blobs: bl, Version: version, Integrity: rt.integrity, Tracer: rt.tracer, Audit: rt.audit,
		Store: rt.store,
	})
	// Connections live until close, not until the signal: at shutdown the
	// in-flight calls must still reach their upstreams (docs/operations.md#shutdown-and-reload).
	rt.connCtx = context.WithoutCancel(ctx)
	for _, c := range rt.conns {
		c.Start(rt.connCtx)
	}
	return rt, nil
}

// openBlobs builds the blob materializer (nil in passthrough mode) and applies
// the folder bounds to what earlier runs left (docs/resources.md#blobs: at startup too).
func (rt *runtime) openBlobs(cfg *config.Config) (*blobs.Materializer, error) {
	if cfg.Blobs.Mode == "passthrough" {
		return nil, nil
	}
	gauge, err := metrics.NewBlobStore(rt.registry)
	if err != nil {
		return nil, err
	}
	bl, err := blobs.New(blobs.Options{Dir: cfg.Blobs.Dir, Mode: blobs.Mode(cfg.Blobs.Mode), MaterializeMedia: cfg.Blobs.MaterializeMedia,
		MaxStoreBytes: cfg.Blobs.MaxBytes, MaxAge: cfg.Blobs.MaxAge.D(), OnStoreSize: gauge.Set})
	if err != nil {
		return nil, configErr(fmt.Errorf("blobs: %w", err))
	}
	if err := bl.Sweep(); err != nil {
		rt.log.Warn().Err(err).Msg("blob folders could not all be trimmed to blobs.max_bytes and blobs.max_age")
	}
	return bl, nil
}

// zlogLine writes standard-library log lines as zerolog warnings.
type zlogLine struct{ log zerolog.Logger }

func (z zlogLine) Write(b []byte) (int, error) {
	z.log.Warn().Str("component", "library").Msg(strings.TrimSpace(string(b)))
	return len(b), nil
}

// newConn builds the connection of one server (not started). Requests wait
// for its first connection at most startupWait from now (docs/operations.md#startup: the
// proxy's start, or the reload that added the server).
func (rt *runtime) newConn(name string, s *config.Server, startupWait time.Duration) *upstream.Conn {
	return upstream.New(s, upstream.Options{
		Logger:          rt.log,
		Auth:            rt.auth,
		StartupDeadline: time.Now().Add(startupWait),
		OnWait: func(outcome string, waited time.Duration) {
			rt.metrics.RequestWaited(name, outcome, waited)
		},
		OnSnapshot: rt.onSnapshot(name),
		// The proxy is built after the first connections and before they
		// start; these run only once a connection is up.
		OnNotification: func(server, method string, params json.RawMessage) {
			rt.proxy.OnUpstreamNotification(server, method, params)
		},
		OnRequest: func(ctx context.Context, server, method string, params json.RawMessage) (json.RawMessage, error) {
			return rt.proxy.OnUpstreamRequest(ctx, server, method, params)
		},
		Tracer: rt.tracer,
	})
}

// onSnapshot returns the snapshot hook of one server: refresh the proxy's
// catalog and count connection results. The connection logs its own
// "upstream connected" and "upstream down" lines.
func (rt *runtime) onSnapshot(name string) func(*upstream.Snapshot) {
	var mu sync.Mutex
	prev := upstream.StateConnecting
	return func(s *upstream.Snapshot) {
		mu.Lock()
		changed := s.State != prev
		prev = s.State
		mu.Unlock()
		if changed {
			switch s.State {
			case upstream.StateConnected:
				rt.metrics.UpstreamConnect(name, "ok")
			case upstream.StateNeedsAuth:
				rt.metrics.UpstreamConnect(name, "needs_auth")
				ev := rt.log.Warn().Str("server", name).Str("state", s.State.String()).Str("command", oauthclient.LoginCommand(name))
				if s.Err != nil {
					ev = ev.Str("error", s.Err.Error())
				}
				ev.Msg("upstream needs authorization; its tools are hidden until it is authorized")
			case upstream.StateFailed, upstream.StateParked:
				rt.metrics.UpstreamConnect(name, "error")
			}
		}
		if s.State == upstream.StateConnected {
			rt.metrics.UpstreamProtocol(name, s.ProtocolVersion) // before the refresh sets the value
		}
		if rt.proxy != nil && !rt.closing.Load() {
			rt.proxy.UpstreamChanged()
		}
	}
}

// config returns the config in force (a reload replaces it whole).
func (rt *runtime) config() *config.Config {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.cfg
}

// connections returns the current connections, a copy safe to range over
// while a reload runs.
func (rt *runtime) connections() map[string]*upstream.Conn {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make(map[string]*upstream.Conn, len(rt.conns))
	for n, c := range rt.conns {
		out[n] = c
	}
	return out
}

// waitAll waits until every upstream's first connection attempt ended.
// When that takes longer than slowStart, it logs once which servers are
// still starting.
func (rt *runtime) waitAll(ctx context.Context) {
	after := rt.slowStart
	if after == 0 {
		after = slowStartNotice
	}
	slow := time.NewTimer(after)
	defer slow.Stop()
	conns := rt.connections()
	for _, c := range conns {
		for waiting := true; waiting; {
			select {
			case <-c.Ready():
				waiting = false
			case <-ctx.Done():
				return
			case <-slow.C:
				rt.logStillStarting(conns, after)
			}
		}
	}
	rt.proxy.Refresh()
}

// logStillStarting logs the servers of conns whose first connection
// attempt has not ended after the time given.
func (rt *runtime) logStillStarting(conns map[string]*upstream.Conn, after time.Duration) {
	var names []string
	for n, c := range conns {
		select {
		case <-c.Ready():
		default:
			names = append(names, n)
		}
	}
	sort.Strings(names)
	rt.log.Info().Strs("servers", names).Dur("after", after).
		Msg("servers still starting; a server run by npx or uvx downloads its package on its first run, which can take a minute (connect_timeout bounds it)")
}

// summary logs the operator's view of what the proxy serves: each server's
// state, the tools the servers offer (upstream_tools), and the tools an
// agent granted every server lists (exposed_tools: what the proxy's catalog
// lists of each connected server, that is its tools after its
// tools.include/exclude and without those tool integrity holds, plus the
// proxy's own tools that such an agent is offered). Agent policy is not
// applied: it differs per agent.
func (rt *runtime) summary() {
	cfg := rt.config()
	conns := rt.connections()
	names := make([]string, 0, len(conns))
	for n := range conns {
		names = append(names, n)
	}
	sort.Strings(names)
	var connected, offered, exposed int
	var resources, prompts bool
	var states []string
	listed := rt.proxy.Catalog().ListedTools()
	for _, n := range names {
		s := conns[n].Snapshot()
		states = append(states, n+"="+s.Status())
		sc := cfg.Servers[n]
		if s.State != upstream.StateConnected || sc == nil {
			continue
		}
		connected++
		offered += len(s.Tools)
		exposed += listed[n]
		resources = resources || s.Capabilities.Resources && sc.ResourcesEnabled()
		prompts = prompts || s.Capabilities.Prompts && sc.PromptsEnabled()
	}
	own := ownTools(cfg, resources, prompts)
	rt.log.Info().Int("servers", len(names)).Int("connected", connected).Int("upstream_tools", offered).
		Int("exposed_tools", exposed+own).Int("own_tools", own).Str("states", strings.Join(states, " ")).Msg("startup summary")
}

// ownTools counts the proxy's own tools offered to an agent that follows the
// top-level settings and is granted every server: tool_search and call_tool
// in deferred mode, mcp_resources and mcp_prompts when a connected server
// offers (and may expose) resources, resp. prompts.
func ownTools(cfg *config.Config, resources, prompts bool) int {
	n := 0
	if cfg.DeferredLoading {
		n++ // tool_search
		if cfg.CallToolListed() {
			n++
		}
	}
	for _, offered := range []bool{resources, prompts} {
		if offered {
			n++
		}
	}
	return n
}

// close closes every upstream in parallel, bounded by closeBudget, and
// meanwhile writes the audit log's queue and flushes the traces (nothing
// adds to them any more: the calls have ended), each within its own
// shorter budget (audit.CloseBudget, tracing.ShutdownBudget); then it ends
// what the upstreams' processes left behind (upstream.Reaper).
func (rt *runtime) close() {
	rt.closing.Store(true)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := rt.audit.Close(context.Background()); err != nil {
			rt.log.Warn().Err(err).Msg("audit log not fully written at shutdown")
		}
	})
	wg.Go(func() {
		if err := rt.tracer.Shutdown(context.Background()); err != nil {
			rt.log.Warn().Err(err).Msg("traces not fully exported at shutdown")
		}
	})
	for name, c := range rt.connections() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Close(); err != nil {
				rt.log.Debug().Str("server", name).Err(err).Msg("upstream closed")
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeBudget):
		rt.log.Warn().Msg("some upstreams did not close in time; their process groups are killed")
		upstream.KillGroups()
	}
	rt.reaper.Close(closeBudget - time.Since(start))
	if err := rt.store.Close(); err != nil {
		rt.log.Debug().Err(err).Msg("shared-state store closed")
	}
}

// openStore opens the shared-state store (docs/shared-state.md) with its
// metrics. A Redis store that does not answer yet is not an error: the
// proxy starts, /readyz says it is not ready, and the client connects once
// Redis does.
func (rt *runtime) openStore(cfg *config.Config) (*store.Store, error) {
	m, err := metrics.NewStore(rt.registry)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(cfg.Store, store.Options{Metrics: m, Logger: rt.log.With().Str("component", "store").Logger()})
	if err != nil {
		return nil, configErr(fmt.Errorf("store: %w", err))
	}
	return st, nil
}

// openAuthStore opens the token store under state_dir (nothing is
// created until a token is written); nil when there is no state_dir, which
// validation allows only while no server needs a store.
func openAuthStore(cfg *config.Config) (*oauthclient.Store, error) {
	if cfg.AuthDir() == "" {
		return nil, nil
	}
	return oauthclient.OpenStore(cfg.AuthDir())
}

// openerOutput writes the output of auth.open commands to the log, one
// line per write, never to stdout (the MCP protocol in stdio mode).
type openerOutput struct{ log zerolog.Logger }

func (o openerOutput) Write(b []byte) (int, error) {
	if line := strings.TrimSpace(string(b)); line != "" {
		o.log.Info().Str("component", "auth.open").Msg(line)
	}
	return len(b), nil
}
