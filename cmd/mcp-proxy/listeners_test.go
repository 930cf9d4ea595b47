package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// testLimits are short enough for a test and far apart enough to tell which
// one acted.
var testLimits = httpLimits{header: 2 * time.Second, body: 300 * time.Millisecond, idle: 400 * time.Millisecond, maxHeaderBytes: 4 << 10}

// serveTest serves h with limits l on a loopback port and returns the
// address.
func serveTest(t *testing.T, h http.Handler, l httpLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(h, l)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// idleConns opens n connections to addr, sends one GET path on each and
// reads its response, leaving the connections open and idle.
func idleConns(t *testing.T, addr, path string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("conn %d: GET %s: %s", i, path, resp.Status)
		}
		conns[i] = c
	}
	return conns
}

// closedWithin reports whether the server closed every connection within d
// (a read returns EOF or a reset), after idle seconds of waiting.
func closedWithin(t *testing.T, conns []net.Conn, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(deadline)
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			open++
		}
	}
	return open
}

// TestIdleConnectionsClosed is issue 12, item 9: kept-alive connections that
// send nothing after GET /healthz are closed after the idle timeout.
func TestIdleConnectionsClosed(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	addr := serveTest(t, ok, testLimits)
	conns := idleConns(t, addr, "/healthz", 50)
	if open := closedWithin(t, conns, testLimits.idle+3*time.Second); open > 0 {
		t.Fatalf("%d of 50 idle connections still open %s after the idle timeout", open, 3*time.Second)
	}
}

// TestSlowBodyIsCut: a body that stops arriving meets a read error after the
// body timeout, and the connection is closed.
func TestSlowBodyIsCut(t *testing.T) {
	readErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		http.Error(w, "cannot read request body", http.StatusBadRequest)
	})
	addr := serveTest(t, h, testLimits)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n0123456789", addr)
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("reading a body that stopped arriving succeeded")
		}
	case <-time.After(testLimits.body + 3*time.Second):
		t.Fatalf("the handler was still reading the body %s after the body timeout", 3*time.Second)
	}
	if open := closedWithin(t, []net.Conn{c}, 3*time.Second); open > 0 {
		t.Fatal("the connection of a cut body stayed open")
	}
}

// TestLongCallNotCut: a handler that runs far beyond every timeout after
// reading its body still writes its reply, and its context is not
// cancelled; so does a stream without a body.
func TestLongCallNotCut(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(testLimits.body + testLimits.idle + 500*time.Millisecond):
		case <-r.Context().Done():
			http.Error(w, "context cancelled", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	addr := serveTest(t, h, testLimits)
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		}
		req, err := http.NewRequest(method, "http://"+addr+"/mcp", body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != "done" {
			t.Errorf("%s: %s %q, want 200 done", method, resp.Status, got)
		}
	}
}

// TestHeaderCap: request headers over the cap are refused.
func TestHeaderCap(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	addr := serveTest(t, ok, testLimits)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2*testLimits.maxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %s, want 431", resp.Status)
	}
}

// TestDefaultLimits pins the values issue 12 asks for, and that no write
// timeout is set (it would cut a 600 s call's reply and every stream).
func TestDefaultLimits(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), defaultHTTPLimits)
	if srv.ReadHeaderTimeout != 10*time.Second || srv.IdleTimeout != 120*time.Second || srv.ReadTimeout != 60*time.Second ||
		srv.MaxHeaderBytes != 64<<10 {
		t.Errorf("limits = header %s, idle %s, body %s, header bytes %d", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.ReadTimeout, srv.MaxHeaderBytes)
	}
	if srv.WriteTimeout != 0 {
		t.Errorf("WriteTimeout %s: must be unset", srv.WriteTimeout)
	}
}

// startServeHTTP runs serve with an HTTP listener and a metrics listener
// (extra: more of its keys) whose limits are testLimits, and returns both
// URLs.
func startServeHTTP(t *testing.T, extra string) (mcpURL, metricsURL string) {
	t.Helper()
	mcpURL, metricsURL, _, _ = startServeHTTPLog(t, extra)
	return mcpURL, metricsURL
}

// startServeHTTPLog is startServeHTTP that also gives the proxy's log and
// its state_dir (a temporary folder).
func startServeHTTPLog(t *testing.T, extra string) (mcpURL, metricsURL string, log *syncBuffer, stateDir string) {
	t.Helper()
	stateDir = t.TempDir()
	cfg, err := config.Parse([]byte("blobs: {mode: passthrough}\nstate_dir: "+strconv.Quote(stateDir)+"\nlisten: {transport: http, addr: \"127.0.0.1:0\"}\nmetrics: {listen: \"127.0.0.1:0\""+extra+"}\n"),
		stateEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	lns, err := bindListeners(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := startRuntime(ctx, cfg, stderr, false)
	if err != nil {
		t.Fatal(err)
	}
	rt.httpLimits = testLimits
	stopMetrics := rt.serveMetrics(cfg, lns.metrics, lns.metricsErr)
	done := make(chan error, 1)
	go func() { done <- rt.serveHTTP(ctx, cfg, lns.mcp) }()
	t.Cleanup(func() {
		cancel()
		<-done
		stopMetrics()
		rt.close()
	})
	urls := map[string]string{}
	const mcpLine, metricsLine = "serving MCP over Streamable HTTP; point your MCP client at this URL", "serving metrics"
	deadline := time.Now().Add(10 * time.Second)
	for (urls[mcpLine] == "" || urls[metricsLine] == "") && time.Now().Before(deadline) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Message, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.URL != "" {
				urls[l.Message] = l.URL
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	mcpURL, metricsURL = urls[mcpLine], urls[metricsLine]
	if mcpURL == "" || metricsURL == "" {
		t.Fatalf("listeners not logged:\n%s", stderr.String())
	}
	return mcpURL, metricsURL, stderr, stateDir
}

// TestListenersCloseIdleConnections: both listeners of a running proxy close
// 50 idle connections each after GET /healthz.
func TestListenersCloseIdleConnections(t *testing.T) {
	mcpURL, metricsURL := startServeHTTP(t, "")
	var all []net.Conn
	for _, u := range []string{mcpURL, metricsURL} {
		addr := strings.TrimPrefix(u, "http://")
		addr = addr[:strings.IndexByte(addr, '/')]
		all = append(all, idleConns(t, addr, "/healthz", 50)...)
	}
	if open := closedWithin(t, all, testLimits.idle+3*time.Second); open > 0 {
		t.Fatalf("%d of 100 idle connections still open after the idle timeout", open)
	}
}

// TestMetricsListenerGuard is issue 12, item 12: the metrics listener
// refuses a rebound Host and a foreign Origin like the MCP endpoint, and
// with metrics.tokens /metrics needs a bearer token while /healthz and
// /readyz stay open. The status page at / follows the same rules (issue
// 19).
func TestMetricsListenerGuard(t *testing.T) {
	_, metricsURL := startServeHTTP(t, "")
	_, tokenURL := startServeHTTP(t, ", tokens: [scrape-s3cret]")
	get := func(url, host, origin, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	base := func(u string) string { return u[:strings.LastIndexByte(u, '/')] }
	cases := []struct {
		name, url, host, origin, token string
		want                           int
		body                           string
	}{
		{"metrics, loopback host", metricsURL, "", "", "", 200, "go_goroutines"},
		{"metrics, rebound host", metricsURL, "attacker.example", "", "", 403, "invalid Host header"},
		{"healthz, rebound host", base(metricsURL) + "/healthz", "attacker.example:80", "", "", 403, "invalid Host header"},
		{"metrics, foreign origin", metricsURL, "", "https://attacker.example", "", 403, "Origin"},
		{"tokens: metrics without a token", tokenURL, "", "", "", 401, "bearer token"},
		{"tokens: metrics with a wrong token", tokenURL, "", "", "nope", 401, "bearer token"},
		{"tokens: metrics with the token", tokenURL, "", "", "scrape-s3cret", 200, "go_goroutines"},
		{"tokens: healthz open", base(tokenURL) + "/healthz", "", "", "", 200, ""},
		{"tokens: readyz open", base(tokenURL) + "/readyz", "", "", "", 200, ""},
		{"status page", base(metricsURL) + "/", "", "", "", 200, "mcp-proxy status"},
		{"status page, rebound host", base(metricsURL) + "/", "attacker.example", "", "", 403, "invalid Host header"},
		{"status page, foreign origin", base(metricsURL) + "/", "", "https://attacker.example", "", 403, "Origin"},
		{"tokens: status page without a token", base(tokenURL) + "/", "", "", "", 401, "metrics.tokens"},
		{"tokens: status page with the token", base(tokenURL) + "/", "", "", "scrape-s3cret", 200, "mcp-proxy status"},
		{"unknown path", base(metricsURL) + "/nosuch", "", "", "", 404, ""},
	}
	for _, c := range cases {
		code, body := get(c.url, c.host, c.origin, c.token)
		if code != c.want || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %.80q, want %d containing %q", c.name, code, body, c.want, c.body)
		}
	}
}

// TestValidateWarnsOpenMetrics: validate warns when the metrics listener is
// reachable from elsewhere and has no tokens.
func TestValidateWarnsOpenMetrics(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		metrics string
		warn    bool
	}{
		{`{listen: "0.0.0.0:9464"}`, true},
		{`{listen: ":9464"}`, true},
		{`{listen: "0.0.0.0:9464", tokens: [t]}`, false},
		{`{listen: "127.0.0.1:9464"}`, false},
	} {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte("blobs: {mode: passthrough}\nmetrics: "+tc.metrics+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := runCLI(t, "validate", "--config", path)
		if err != nil {
			t.Fatalf("%s: %v", tc.metrics, err)
		}
		got := strings.Contains(out, "warning: metrics.tokens: ")
		if got != tc.warn {
			t.Errorf("metrics %s: warning = %v, want %v:\n%s", tc.metrics, got, tc.warn, out)
		}
	}
}
