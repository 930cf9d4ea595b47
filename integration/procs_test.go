package integration

import (
	"strings"
	"testing"
	"time"
)

// procsMessage is the proxy's log line when it sets GOMAXPROCS for one
// stdio client (cmd/mcp-proxy/serve.go, narrowProcs).
const procsMessage = "GOMAXPROCS set for one stdio client (set GOMAXPROCS to choose)"

// A proxy serving one client on its stdin runs on one P once its servers
// have made their first connections (after the startup summary), and calls
// go on being answered; GOMAXPROCS in the environment keeps its own value
// (no such line); over HTTP the proxy keeps every P.
func TestStdioProcs(t *testing.T) {
	cfg := writeConfig(t, "blobs: {mode: passthrough}", fixtureServer("fx", nil))
	t.Run("default", func(t *testing.T) {
		c := startStdioRaw(t, "mcp-proxy", proxyCmd("serve", "--config", cfg))
		rawInit(t, c)
		m := waitLogLine(t, c.p.stderr, procsMessage)
		if m["now"] != float64(1) {
			t.Errorf("log line %v: now = %v, want 1", m, m["now"])
		}
		if r := rawResult(t, c, "tools/call", `{"name":"fx__echo","arguments":{"text":"after"}}`); !strings.Contains(string(r), `"after"`) {
			t.Errorf("a call after GOMAXPROCS was set: %s", r)
		}
	})
	t.Run("GOMAXPROCS set", func(t *testing.T) {
		cmd := proxyCmd("serve", "--config", cfg)
		cmd.Env = append(cmd.Env, "GOMAXPROCS=2")
		c := startStdioRaw(t, "mcp-proxy", cmd)
		rawInit(t, c)
		waitLogLine(t, c.p.stderr, "startup summary")
		rawResult(t, c, "tools/call", `{"name":"fx__echo","arguments":{"text":"x"}}`)
		if m := logLine(c.p.stderr, procsMessage); m != nil {
			t.Errorf("GOMAXPROCS was set by the environment, yet the proxy logged %v", m)
		}
	})
	t.Run("HTTP", func(t *testing.T) {
		_, p := startHTTPProxy(t, cfg)
		waitLogLine(t, p.stderr, "startup summary")
		// The stdio proxy logs it right after the summary, from the same
		// goroutine: a moment is plenty for a line that must not come.
		time.Sleep(300 * time.Millisecond)
		if m := logLine(p.stderr, procsMessage); m != nil {
			t.Errorf("an HTTP proxy logged %v", m)
		}
	})
}
