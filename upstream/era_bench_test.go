package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

// BenchmarkConnectEra measures one connection, from New to the first
// catalog (transport, handshake, discovery), to a server of each era with
// protocol pinned to it and with protocol auto: the price of the
// server/discover probe that auto sends first (an extra round trip to a
// session-era server; none to a 2026-07-28 one, where it replaces
// initialize). Stdio includes the child's start (the test binary as the
// fake); HTTP is an in-process mcp-go server (the session-era one refuses
// server/discover).
func BenchmarkConnectEra(b *testing.B) {
	httpSrv := httptest.NewServer(server.NewStreamableHTTPServer(newMCPGoServer()))
	b.Cleanup(httpSrv.Close)
	// A session-era HTTP server: the same, refusing server/discover with
	// method not found as servers that predate it do.
	inner := server.NewStreamableHTTPServer(newMCPGoServer())
	oldSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"server/discover"`)) {
				var m struct{ ID json.RawMessage }
				_ = json.Unmarshal(body, &m)
				writeJSON(w, 200, rpcError(m.ID, -32601, "Method not found", ""))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		inner.ServeHTTP(w, r)
	}))
	b.Cleanup(oldSrv.Close)
	for _, bc := range []struct {
		name     string
		protocol string
		mcpgo    bool // mcp-go's server (which speaks 2026-07-28), else a session-era one
		http     bool
	}{
		{"stdio/session-era/pinned-2025-11-25", "2025-11-25", false, false},
		{"stdio/session-era/auto", "auto", false, false},
		{"stdio/2026-era/pinned-2026-07-28", "2026-07-28", true, false},
		{"stdio/2026-era/auto", "auto", true, false},
		{"http/session-era/pinned-2025-11-25", "2025-11-25", false, true},
		{"http/session-era/auto", "auto", false, true},
		{"http/2026-era/pinned-2026-07-28", "2026-07-28", true, true},
		{"http/2026-era/auto", "auto", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := fakeServer(b, "bench")
			switch {
			case bc.http && bc.mcpgo:
				cfg = httpServer("bench", httpSrv.URL+"/mcp")
			case bc.http:
				cfg = httpServer("bench", oldSrv.URL+"/mcp")
			case bc.mcpgo:
				cfg.Env["UPSTREAM_FAKE"] = "mcpgo"
			}
			cfg.Protocol = bc.protocol
			for b.Loop() {
				c := New(cfg, Options{Backoff: noRetry})
				c.Start(context.Background())
				<-c.Ready()
				if s := c.Snapshot(); s.State != StateConnected {
					b.Fatalf("state %s: %v", s.State, s.Err)
				}
				_ = c.Close()
			}
		})
	}
}
