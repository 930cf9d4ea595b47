package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"time"

	"github.com/mcp-proxy/mcp-proxy/authn"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/downstream"
	"github.com/mcp-proxy/mcp-proxy/status"
	"github.com/rs/zerolog"
)

// httpShutdownGrace is how long in-flight HTTP requests (tool calls) may run
// after a signal (docs/operations.md#shutdown-and-reload: up to 10 s).
const httpShutdownGrace = 10 * time.Second

func runServe(ctx context.Context, cfg *config.Config, o options, stdin io.Reader, stdout, stderr io.Writer) error {
	// An HTTP server with no --agent serves every agent on its own path;
	// its default path answers 404 listing the agents when none is the
	// default (docs/agents.md#agents-bundles-and-policy). stdio serves one agent, which must exist.
	// The listeners are bound before any server starts: a port already
	// taken ends the start at once, with nothing spawned.
	lns, err := bindListeners(cfg)
	if err != nil {
		return err
	}
	rt, _, err := startFor(ctx, cfg, o, stderr, o.agent != "" || cfg.Listen.Transport != "http")
	if err != nil {
		lns.close()
		return err
	}
	defer rt.close()
	for _, w := range cfg.Warnings() {
		rt.log.Info().Msg(w)
	}
	stopMetrics := rt.serveMetrics(cfg, lns.metrics, lns.metricsErr)
	defer stopMetrics()
	stopReload := rt.reloadOnHUP(ctx, o)
	defer stopReload()
	stopPins := rt.watchPins(ctx)
	defer stopPins()
	stdio := cfg.Listen.Transport != "http"
	go func() {
		rt.waitAll(ctx)
		rt.summary()
		if stdio && ctx.Err() == nil {
			narrowProcs(stdin, rt.log)
		}
		if ctx.Err() == nil {
			settleHeap()
		}
	}()

	if !stdio {
		return rt.serveHTTP(ctx, cfg, lns.mcp)
	}
	rt.log.Info().Str("agent", agentName(cfg, o.agent)).Msg("serving MCP on stdio")
	return rt.proxy.ServeStdio(ctx, o.agent, o.perCall(), stdin, stdout)
}

// stdioProcs is how many Ps (GOMAXPROCS) a proxy serving one client on
// the process's own stdin keeps once its servers have made their first
// connections. One client's requests need little CPU at once, and with one
// P a response read from an upstream readies the request waiting for it
// without waking a second thread: in the load test on 2 cores this took
// 20-30 % off the CPU of every call, at the same or lower latency. The
// start (every server's handshake and tool review at once) runs on every P.
const stdioProcs = 1

// narrowProcs sets GOMAXPROCS to stdioProcs when stdin is the process's
// own (not a test's pipe) and the environment does not choose GOMAXPROCS.
func narrowProcs(stdin io.Reader, log zerolog.Logger) {
	if f, ok := stdin.(*os.File); !ok || f != os.Stdin {
		return
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	was := goruntime.GOMAXPROCS(stdioProcs)
	log.Debug().Int("was", was).Int("now", stdioProcs).Msg("GOMAXPROCS set for one stdio client (set GOMAXPROCS to choose)")
}

// settleHeap collects the garbage of the start, once every server's first
// connection is settled, and returns the memory it freed. The collector
// sets its next goal at twice the heap it finds live, and the last
// collection of the start finds its working set live (handshakes, pages,
// tool reviews and catalog builds of every server at once): without this
// one, the heap of a proxy with 20 servers of 100 tools grew to about 15 MB
// before its next collection, where it now grows to about 11. It runs
// once, off the path of any request.
func settleHeap() { debug.FreeOSMemory() }

// agentName is the agent a verb serves: --agent, else the default agent.
func agentName(cfg *config.Config, flagAgent string) string {
	switch {
	case flagAgent != "":
		return flagAgent
	case cfg.HasAgents():
		return cfg.DefaultAgent
	}
	return config.ImplicitAgent
}

// perCall is the --allowed-tools list, nil when the flag was not given.
func (o options) perCall() []string {
	return downstream.ParseAllowedTools(o.allowedTools, o.allowedSet)
}

// serveHTTP serves the Streamable HTTP endpoint on ln until ctx ends, and
// closes ln.
func (rt *runtime) serveHTTP(ctx context.Context, cfg *config.Config, ln net.Listener) error {
	rt.mu.Lock()
	rt.bound = ln.Addr().String()
	rt.mu.Unlock()
	url := "http://" + ln.Addr().String() + cfg.Listen.Path
	ev := rt.log.Info().Str("url", url)
	if cfg.Listen.Auth != nil {
		// Under OAuth the endpoint's public URL is the resource tokens are
		// issued for; clients behind a reverse proxy use it, not url.
		a := authn.New(cfg, authn.Options{BoundAddr: ln.Addr().String()})
		ev = ev.Str("public_url", a.Resource("")).Str("resource_metadata", a.MetadataURL(""))
	}
	ev.Msg("serving MCP over Streamable HTTP; point your MCP client at this URL")
	srv := newHTTPServer(rt.proxy.HTTPHandler(ln.Addr().String()), rt.httpLimits)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	rt.log.Info().Msg("shutting down: finishing in-flight calls")
	sctx, cancel := context.WithTimeout(context.Background(), httpShutdownGrace)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	rt.proxy.ShutdownHTTP(sctx)
	if err := <-shut; err != nil {
		_ = srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return nil
}

// serveMetrics serves /metrics, /healthz, /readyz and the status page on
// ln, the metrics.listen listener bound by bindListeners, and samples the
// proxy's metrics for the page's window until stop. A port that could not
// be bound (ln nil, bindErr set) is a warning: the proxy keeps serving
// (docs/operations.md#shutdown-and-reload).
func (rt *runtime) serveMetrics(cfg *config.Config, ln net.Listener, bindErr error) (stop func()) {
	if bindErr != nil {
		rt.log.Warn().Err(bindErr).Msg("metrics listener not started; the proxy keeps serving")
		return func() {}
	}
	if ln == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	win := status.NewWindow(rt.registry, nil)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		win.Run(ctx)
	}()
	pageToken, err := status.LoadToken(cfg.StateDir)
	if err != nil {
		rt.log.Warn().Err(err).Msg("status page: no status token; without metrics.tokens the page is read-only")
	} else {
		rt.logOut.addSecrets([]string{pageToken}) // in no line but pageLine's
	}
	healthz, readyz := rt.proxy.Health()
	srv := newHTTPServer(metricsHandler(cfg, rt.registry, healthz, readyz, rt.statusPage(cfg, win, pageToken)), rt.httpLimits)
	go func() { _ = srv.Serve(ln) }()
	rt.log.Info().Str("url", "http://"+ln.Addr().String()+cfg.Metrics.Path).Msg("serving metrics")
	rt.pageLine(cfg, ln.Addr().String(), pageToken)
	return func() {
		_ = srv.Close()
		cancel()
		<-sampled
	}
}

// pageLine logs where the status page is. Without metrics.tokens it also
// gives sign_in_url, the address with the status token that lets a
// browser act (as Jupyter prints its token): the one deliberate print of
// the token. With metrics.tokens it does not (their holders sign in with
// them, and such logs are often collected where others read them);
// `mcp-proxy status url` prints it.
//
// Every log line goes through the scrubber, which drops URL queries and
// has the token among its secrets; this one is written past it, so it
// carries nothing else from outside (an address and a token).
func (rt *runtime) pageLine(cfg *config.Config, addr, pageToken string) {
	base, err := pageBase(addr)
	if err != nil || pageToken == "" || len(cfg.Metrics.Tokens) > 0 {
		rt.log.Info().Str("url", "http://"+addr+"/").Msg("serving the status page")
		return
	}
	page := newLogger(cfg, rt.logOut.unscrubbed())
	page.Info().Str("url", "http://"+addr+"/").Str("sign_in_url", signInURL(base, pageToken)).Msg("serving the status page")
}
