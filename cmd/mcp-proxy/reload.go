package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"sort"
	"strings"
	"syscall"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/downstream"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// reloadOnHUP reloads the config on every SIGHUP until ctx ends or stop is
// called (docs/operations.md#shutdown-and-reload).
func (rt *runtime) reloadOnHUP(ctx context.Context, o options) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-hup:
				rt.reload(ctx, o)
			case <-ctx.Done():
				return
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}

// reload loads the config again and applies it: added servers connect,
// removed ones close, changed ones restart; sessions keep their grants and
// new sessions get the new ones. A config that does not load is logged and
// the running one stays. Listen and metrics settings need a restart: a
// change to either is logged and the running one kept (so a listen the
// file changed is never judged), and the new config must pass validation
// with the listener as it is bound (a reload cannot
// take the tokens away from a listener others can reach).
func (rt *runtime) reload(ctx context.Context, o options) {
	cfg, path, err := readConfig(o)
	if err == nil {
		rt.logOut.addSecrets(cfg.Secrets())
		err = rt.keepListeners(cfg)
	}
	if err != nil {
		rt.log.Error().Str("error", err.Error()).Msg("config reload failed; the running config stays in force")
		return
	}

	rt.mu.Lock()
	old := rt.conns
	next := map[string]*upstream.Conn{}
	var closing []*upstream.Conn
	var added, removed, restarted []string
	for name, s := range cfg.Servers {
		if !cfg.IsEnabled() || !s.IsEnabled() {
			continue
		}
		if c, ok := old[name]; ok && serverUnchanged(rt.cfg.Servers[name], s) {
			next[name] = c
			continue
		}
		if c, ok := old[name]; ok {
			closing = append(closing, c)
			restarted = append(restarted, name)
		} else {
			added = append(added, name)
		}
		next[name] = rt.newConn(name, s, cfg.StartupWait.D())
	}
	for name, c := range old {
		if _, kept := next[name]; !kept {
			closing = append(closing, c)
			removed = append(removed, name)
			rt.metrics.ForgetServer(name)
		}
	}
	rt.cfg, rt.conns = cfg, next
	rt.mu.Unlock()

	ups := make(map[string]downstream.Upstream, len(next))
	for name, c := range next {
		ups[name] = c
	}
	rt.proxy.Reload(cfg, ups)
	for _, name := range append(added, restarted...) {
		next[name].Start(rt.connCtx)
	}
	go closeAll(closing)
	sort.Strings(added)
	sort.Strings(removed)
	sort.Strings(restarted)
	rt.log.Info().Str("config", path).Str("added", strings.Join(added, ",")).Str("removed", strings.Join(removed, ",")).
		Str("restarted", strings.Join(restarted, ",")).Msg("config reloaded")
}

// keepListeners gives cfg the running listen and metrics settings, warning
// when the file changed them, and validates it against the address the
// MCP listener is actually bound to (the running listen.addr before it is).
func (rt *runtime) keepListeners(cfg *config.Config) error {
	rt.mu.Lock()
	running, bound := rt.cfg, rt.bound
	rt.mu.Unlock()
	if !reflect.DeepEqual(cfg.Listen, running.Listen) {
		rt.log.Warn().Msg("config reload: listen changed; it takes effect only after a restart, the running listener stays")
		cfg.Listen = running.Listen
	}
	if !reflect.DeepEqual(cfg.Metrics, running.Metrics) {
		rt.log.Warn().Msg("config reload: metrics changed; it takes effect only after a restart, the running metrics listener stays")
		cfg.Metrics = running.Metrics
	}
	check := *cfg
	if bound != "" {
		check.Listen.Addr = bound
	}
	if err := check.Validate(); err != nil {
		return fmt.Errorf("with the listener on %s: %w", check.Listen.Addr, err)
	}
	return nil
}

// serverUnchanged reports whether a server's definition is the same in two
// configs (then its connection is kept).
func serverUnchanged(a, b *config.Server) bool {
	return a != nil && b != nil && reflect.DeepEqual(*a, *b)
}

func closeAll(conns []*upstream.Conn) {
	for _, c := range conns {
		go func() { _ = c.Close() }()
	}
}
