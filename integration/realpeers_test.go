package integration

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Behaviour real peers showed (issues 13 and 21), checked against the
// peers themselves: server-filesystem's roots/list, the go-sdk client
// ending an HTTP session without DELETE, server-everything behind a rate
// limit.

// TestRootsConfiguredFilesystem: server-filesystem asks roots/list right
// after it connects. A stdio client that declared no roots cannot be
// asked, so the proxy answers with the server's configured roots, and
// server-filesystem takes them as its allowed directories instead of the
// one on its command line.
func TestRootsConfiguredFilesystem(t *testing.T) {
	t.Parallel()
	argDir, rootDir := t.TempDir(), t.TempDir()
	// server-filesystem reports directories by their real path.
	rootDir, err := filepath.EvalSymlinks(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "", filesystemServer("filesystem", argDir,
		"roots: [{uri: "+q("file://"+rootDir)+", name: work}]"))
	c := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)

	// server-filesystem applies the roots once they arrive, after its
	// initialize: poll until the tool reports them.
	var text string
	sfWaitFor(callTimeout, func() bool {
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		}
		raw := rawResult(t, c, "tools/call", callParams("filesystem__list_allowed_directories", `{}`))
		if err := json.Unmarshal(raw, &res); err != nil || res.IsError || len(res.Content) == 0 {
			t.Fatalf("list_allowed_directories: %s (%v)", raw, err)
		}
		text = res.Content[0].Text
		return strings.Contains(text, rootDir)
	})
	if !strings.Contains(text, rootDir) || strings.Contains(text, argDir) {
		t.Errorf("list_allowed_directories = %q; want the configured root %s in place of %s", text, rootDir, argDir)
	}
	// The proxy logs its servers' stderr: server-filesystem's own account
	// of the roots reaches it (soon after the roots took effect).
	sfWaitFor(callTimeout, func() bool {
		return strings.Contains(c.p.stderr.String(), "Updated allowed directories from MCP roots")
	})
	if s := c.p.stderr.String(); strings.Contains(s, "Failed to request initial roots") ||
		!strings.Contains(s, "Updated allowed directories from MCP roots") {
		t.Errorf("server-filesystem did not take its roots from the proxy:\n%s", tail(s, 4000))
	}
}

// dropDeletes is an http.RoundTripper that never sends a DELETE: the
// go-sdk client then ends its session the way the TypeScript SDK's
// close() and the Inspector do, by dropping its streams and nothing else.
type dropDeletes struct {
	dropped atomic.Int64
}

func (d *dropDeletes) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete {
		d.dropped.Add(1)
		return nil, errors.New("this client sends no DELETE")
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestIdleSessionClosedWithoutDelete: an HTTP session whose client went
// away without DELETE stops counting in mcp_proxy_sessions_active once
// listen.session_idle_timeout has passed.
func TestIdleSessionClosedWithoutDelete(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `metrics: {listen: "127.0.0.1:0"}
listen: {session_idle_timeout: 1s}
`, fixtureServer("fx", []string{"-no-weird"}))
	url, p := startHTTPProxy(t, cfg)
	metrics := sfMetricsURL(t, p.stderr)
	active := func() float64 {
		return sfMetric(t, metrics, "mcp_proxy_sessions_active", `transport="http"`)
	}

	rt := &dropDeletes{}
	ctx := testCtx(t, startTimeout)
	cs, err := mcp.NewClient(sdkImpl, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: rt},
	}, sfSession())
	if err != nil {
		t.Fatalf("go-sdk: connect to %s: %v", url, err)
	}
	if _, err := cs.ListTools(testCtx(t, callTimeout), nil); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if got := active(); got != 1 {
		t.Fatalf("mcp_proxy_sessions_active{transport=http} = %v with one session open, want 1", got)
	}
	_ = cs.Close() // its DELETE fails, as it should here
	if rt.dropped.Load() == 0 {
		t.Fatal("the go-sdk client did not try a DELETE, so this test shows nothing")
	}

	closed := time.Now()
	if !sfWaitFor(20*time.Second, func() bool { return active() == 0 }) {
		t.Fatalf("mcp_proxy_sessions_active{transport=http} = %v 20s after the client went away; want 0 (idle timeout 1s)", active())
	}
	// The sweep logs once it has closed the sessions it found.
	if !sfWaitFor(callTimeout, func() bool { return logLine(p.stderr, "idle HTTP sessions closed") != nil }) {
		t.Errorf("the session went away %s after its client, but not by the idle sweep", time.Since(closed).Round(time.Millisecond))
	}
}

// TestRateLimitEverything: a server limit of one call a minute lets the
// first call to server-everything through and refuses an immediate
// second one, naming the limit, without sending it upstream.
func TestRateLimitEverything(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `metrics: {listen: "127.0.0.1:0"}
`, everythingServer("everything", "limits: {per_minute: 1}"))
	cs, _, stderr := sdkStdioProxyCmd(t, cfg, nil, nil)
	metrics := sfMetricsURL(t, stderr)
	if got := sfOK(t, cs, "everything__echo", map[string]any{"message": "first"}); got != "Echo: first" {
		t.Errorf("the first call = %q, want server-everything's echo", got)
	}
	const want = "tool 'everything__echo' is denied by rate_limited: server 'everything' takes 1 call a minute; retry in "
	if got := sfToolError(t, cs, "everything__echo", map[string]any{"message": "second"}); !strings.HasPrefix(got, want) {
		t.Errorf("the second call = %q, want it refused: %q…", got, want)
	}
	if got := sfMetric(t, metrics, "mcp_proxy_rate_limited_total", `server="everything"`, `limit="server_rate"`); got != 1 {
		t.Errorf("mcp_proxy_rate_limited_total{server=everything,limit=server_rate} = %v, want 1", got)
	}
	if got := sfMetric(t, metrics, "mcp_proxy_tool_calls_total", `server="everything"`, `tool="echo"`, `outcome="ok"`); got != 1 {
		t.Errorf("calls sent to server-everything's echo: %v, want 1 (the refused one is not sent)", got)
	}
}
