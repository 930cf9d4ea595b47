package main

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
	"github.com/mcp-proxy/mcp-proxy/status"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// statusPage builds the status page of the running proxy (package status)
// over win, its window of the proxy's own metrics; pageToken is the status
// token ("" when there is none).
func (rt *runtime) statusPage(cfg *config.Config, win *status.Window, pageToken string) *status.Handler {
	return status.New(status.Options{
		State:      rt.statusState,
		Window:     win,
		Approve:    rt.approveTool,
		BeginLogin: rt.beginLogin,
		Tokens:     cfg.Metrics.Tokens,
		PageToken:  pageToken,
		OnSignIn:   rt.metrics.StatusSignIn,
		Secrets: func() []string {
			return rt.config().Secrets()
		},
		Logger:  rt.log,
		Version: "mcp-proxy " + version,
	})
}

// statusState gathers what the status page shows: every configured
// server's connection, tools and OAuth standing, the quarantined tools
// with their pending diffs, and the served tools with scan findings.
func (rt *runtime) statusState() status.State {
	cfg := rt.config()
	conns := rt.connections()
	counts := map[string]*[3]int{} // exposed, excluded, quarantined
	var st status.State
	pending := map[string]map[string]integrity.Change{}
	rt.proxy.Refresh() // during the start the catalog is built on demand (Proxy.UpstreamChanged)
	for _, e := range rt.proxy.Catalog().Tools() {
		if !e.Connected {
			continue
		}
		n := counts[e.Server]
		if n == nil {
			n = &[3]int{}
			counts[e.Server] = n
		}
		var v *integrity.Verdict
		if rev := rt.integrity.Last(e.Server); rev != nil {
			v = rev.Verdict(e.Name)
		}
		switch {
		case e.Filtered:
			n[1]++
		case e.Held:
			n[2]++
			if _, ok := pending[e.Server]; !ok {
				pending[e.Server] = pendingByTool(rt.integrity, e.Server)
			}
			st.Held = append(st.Held, heldTool(e.Server, e.Name, e.Exposed, v, rt.integrity.Last(e.Server), pending[e.Server]))
		default:
			n[0]++
			if v != nil && len(v.Findings) > 0 {
				st.Findings = append(st.Findings, status.ToolFindings{Server: e.Server, Tool: e.Name, Exposed: e.Exposed, Findings: v.Findings})
			}
		}
	}
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		row := status.Server{Name: name, Transport: s.Transport, State: status.StateDisabled}
		c := conns[name]
		if c == nil || !s.IsEnabled() || !cfg.IsEnabled() {
			st.Servers = append(st.Servers, row)
			continue
		}
		snap := c.Snapshot()
		row.State, row.NextRetry, row.ReconnectUntil, row.Protocol = snap.Status(), snap.NextRetry, snap.ReconnectUntil, snap.ProtocolVersion
		if snap.Err != nil && snap.State != upstream.StateConnected {
			row.Error = snap.Err.Error()
		}
		if n := counts[name]; n != nil {
			row.Exposed, row.Excluded, row.Quarantined = n[0], n[1], n[2]
		}
		if a := c.Authorizer(); a != nil {
			as := a.Status()
			row.Auth = &status.Auth{Kind: a.Kind(), State: as.State, Expiry: as.Expiry, Browser: a.Kind() == oauthclient.KindOAuth}
		}
		st.Servers = append(st.Servers, row)
	}
	sort.Slice(st.Held, func(i, j int) bool {
		a, b := st.Held[i], st.Held[j]
		return a.Server < b.Server || a.Server == b.Server && a.Tool < b.Tool
	})
	sort.Slice(st.Findings, func(i, j int) bool {
		a, b := st.Findings[i], st.Findings[j]
		return a.Server < b.Server || a.Server == b.Server && a.Tool < b.Tool
	})
	return st
}

// pendingByTool reads server's pending definitions from its pin file; an
// unreadable file gives none (the verdicts then say store_error).
func pendingByTool(g *integrity.Guard, server string) map[string]integrity.Change {
	changes, err := g.Store().Pending(server)
	if err != nil {
		return nil
	}
	out := make(map[string]integrity.Change, len(changes))
	for _, c := range changes {
		out[c.Tool] = c
	}
	return out
}

// heldTool is one quarantined tool of the page: approvable when a changed
// or new definition is pending, with its diff; otherwise with what
// releases it.
func heldTool(server, tool, exposed string, v *integrity.Verdict, rev *integrity.Review, pending map[string]integrity.Change) status.HeldTool {
	t := status.HeldTool{Server: server, Tool: tool, Exposed: exposed}
	if v == nil {
		t.Hint = "its verdict is being computed; reload in a moment"
		return t
	}
	t.Reasons, t.Fingerprint, t.Findings = v.Reasons, v.Fingerprint, v.Findings
	c, ok := pending[tool]
	if ok && (slices.Contains(v.Reasons, integrity.ReasonChanged) || slices.Contains(v.Reasons, integrity.ReasonNew)) {
		t.Approvable, t.Fingerprint, t.Diff = true, c.Pending.Fingerprint, c.Diff()
	}
	switch {
	case slices.Contains(v.Reasons, integrity.ReasonScan):
		t.Hint = "The description scan holds it whatever is approved: re-describe it under servers." + server +
			".tools.overrides, or set servers." + server + ".scan: warn."
	case slices.Contains(v.Reasons, integrity.ReasonStoreError) && rev != nil && rev.Err != nil:
		t.Hint = "The pin file cannot be used: " + rev.Err.Error() + ". Repair or delete it."
	case !t.Approvable:
		t.Hint = reviewCommand(v)
	}
	return t
}

// approveTool pins the reviewed pending definition of server's tool and
// rebuilds the catalog at once (the pin watch would within
// integrity.WatchInterval), so the page shows the tool released.
func (rt *runtime) approveTool(server, tool, fingerprint string) error {
	if rt.config().Servers[server] == nil {
		return fmt.Errorf("unknown server %q", server)
	}
	if _, err := rt.integrity.Store().ApproveFingerprint(server, tool, fingerprint); err != nil {
		return err
	}
	rt.proxy.Reevaluate()
	return nil
}

// beginLogin begins the OAuth login of server through the token client its
// connection waits on, so that the connection picks the token up at once.
func (rt *runtime) beginLogin(ctx context.Context, server, redirectURI string) (*oauthclient.BrowserLogin, error) {
	c := rt.connections()[server]
	if c == nil || c.Authorizer() == nil {
		return nil, fmt.Errorf("server %q has no OAuth login", server)
	}
	return c.Authorizer().BeginLogin(ctx, redirectURI)
}
