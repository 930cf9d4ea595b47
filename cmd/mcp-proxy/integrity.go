package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// openGuard opens the tool integrity guard of cfg: the pin files of every
// enabled server that pins must be readable, or the proxy does not start.
func (rt *runtime) openGuard(cfg *config.Config) error {
	g, err := integrity.Open(integrity.Options{StateDir: cfg.StateDir, Logger: rt.log, Metrics: rt.metrics, Shared: rt.store},
		integrity.PinningServers(cfg))
	if err != nil {
		return &exitError{code: exitRuntime, err: err}
	}
	rt.integrity = g
	return nil
}

// reviews is the integrity review of every connected server as the
// catalog build last made it (Guard.Last: no second review).
func (rt *runtime) reviews() map[string]*integrity.Review {
	out := map[string]*integrity.Review{}
	for name, c := range rt.connections() {
		if c.Snapshot().State != upstream.StateConnected {
			continue
		}
		if rev := rt.integrity.Last(name); rev != nil {
			out[name] = rev
		}
	}
	return out
}

// watchPins runs the guard's watch until ctx ends: approvals made with
// `mcp-proxy tools approve` reach the running proxy within
// integrity.WatchInterval. It returns a function that stops the watch and
// waits for it.
func (rt *runtime) watchPins(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rt.integrity.Watch(ctx, integrity.WatchInterval, func(servers []string) {
			rt.log.Info().Strs("servers", servers).Msg("tool pins changed on disk; tool verdicts re-evaluated")
			rt.proxy.Reevaluate()
		})
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// runToolsDiff prints the unified diff of every pending tool definition
// (of server, or of all servers) against its pin.
func runToolsDiff(cfg *config.Config, server string, stdout io.Writer) error {
	if server != "" {
		if err := knownServer(cfg, server); err != nil {
			return err
		}
	}
	pins, done, err := openCLIPins(cfg)
	if err != nil {
		return err
	}
	defer done()
	changes, err := pins.Pending(server)
	if err != nil {
		return &exitError{code: exitRuntime, err: err}
	}
	if len(changes) == 0 {
		fmt.Fprintln(stdout, "no tool definitions are pending approval")
		return nil
	}
	for _, c := range changes {
		// The diff shows strings JSON-escaped; the characters JSON
		// leaves as they are (C1 and bidi controls) are escaped too.
		if _, err := io.WriteString(stdout, sanitize.Terminal(c.Diff())); err != nil {
			return err
		}
	}
	what := "tool definitions are"
	if len(changes) == 1 {
		what = "tool definition is"
	}
	fmt.Fprintf(stdout, "\n%d %s pending; approve with: mcp-proxy tools approve %s\n", len(changes), what, sanitize.TerminalLine(approveHint(changes)))
	return nil
}

// approveHint is the approve command line for changes.
func approveHint(changes []integrity.Change) string {
	names := make([]string, len(changes))
	for i, c := range changes {
		names[i] = c.Server + "/" + c.Tool
	}
	return strings.Join(names, " ")
}

// runToolsApprove pins the pending definitions named (server/tool or an
// exposed name), or all of one server's, or all of every server's.
func runToolsApprove(cfg *config.Config, names []string, server string, all bool, stdout io.Writer) error {
	switch {
	case len(names) > 0 && (server != "" || all), server != "" && all:
		return usageErr("usage: mcp-proxy tools approve NAME... | --server SERVER | --all")
	case len(names) == 0 && server == "" && !all:
		return usageErr("usage: mcp-proxy tools approve NAME... | --server SERVER | --all (NAME is server/tool or the exposed name)")
	}
	store, done, err := openCLIPins(cfg)
	if err != nil {
		return err
	}
	defer done()
	selected := map[string][]string{} // server -> tools; nil slice: all pending
	switch {
	case all:
		servers, err := store.Servers()
		if err != nil {
			return &exitError{code: exitRuntime, err: err}
		}
		for _, s := range servers {
			selected[s] = nil
		}
	case server != "":
		if err := knownServer(cfg, server); err != nil {
			return err
		}
		selected[server] = nil
	default:
		for _, n := range names {
			s, tool, err := resolveToolName(cfg, store, n)
			if err != nil {
				return err
			}
			selected[s] = append(selected[s], tool)
		}
	}
	servers := make([]string, 0, len(selected))
	for s := range selected {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	count := 0
	for _, s := range servers {
		approved, err := store.Approve(s, selected[s])
		if err != nil {
			return &exitError{code: exitRuntime, err: err}
		}
		for _, c := range approved {
			from := "new"
			if c.Pinned != nil {
				from = integrity.ShortFingerprint(c.Pinned.Fingerprint)
			}
			fmt.Fprintf(stdout, "approved %s/%s (%s -> %s)\n", c.Server, sanitize.TerminalLine(c.Tool), from, integrity.ShortFingerprint(c.Pending.Fingerprint))
		}
		count += len(approved)
	}
	if count == 0 {
		fmt.Fprintln(stdout, "nothing to approve")
	}
	return nil
}

// knownServer refuses a server name the config does not have.
func knownServer(cfg *config.Config, server string) error {
	if cfg.Servers[server] == nil {
		return usageErr("unknown server %q (servers: %s)", server, strings.Join(cfg.ServerNames(), ", "))
	}
	return nil
}

// resolveToolName maps "server/tool" or an exposed name to (server, upstream
// tool name). Exposed names are computed from the config's naming,
// prefixes and override names over the tools in the pin files, as the
// proxy names them.
func resolveToolName(cfg *config.Config, store *integrity.Store, name string) (string, string, error) {
	if s, tool, ok := strings.Cut(name, "/"); ok && cfg.Servers[s] != nil {
		return s, tool, nil
	}
	var inputs []namespace.Input
	for _, s := range cfg.ServerNames() {
		tools, err := store.Tools(s)
		if err != nil {
			return "", "", &exitError{code: exitRuntime, err: err}
		}
		in := namespace.Input{Server: s, Prefix: cfg.Servers[s].PrefixValue(), Names: tools}
		for _, tool := range tools {
			if ov := cfg.Servers[s].Tools.Overrides[tool]; ov != nil && ov.Name != "" {
				if in.Renames == nil {
					in.Renames = map[string]string{}
				}
				in.Renames[tool] = ov.Name
			}
		}
		inputs = append(inputs, in)
	}
	table, _ := namespace.Build(namespace.Style(cfg.Naming), inputs)
	if r, ok := table.Lookup(name); ok {
		return r.Server, r.Name, nil
	}
	return "", "", &exitError{code: exitRuntime, err: fmt.Errorf("%w: no pinned or pending tool is named %q (write server/tool)", integrity.ErrNothingPending, name)}
}
