package upstream

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mcp-proxy/mcp-proxy/config"
)

// headerLog records one header of every request a test server got.
type headerLog struct {
	mu     sync.Mutex
	name   string
	values []string
}

func (h *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.values = append(h.values, r.Method+" "+r.Header.Get(h.name))
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *headerLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.values...)
}

func newMCPGoServer() *server.MCPServer {
	srv := server.NewMCPServer("httpfake", "2.0", server.WithToolCapabilities(true),
		server.WithInstructions("Over HTTP."))
	srv.AddTool(mcp.NewTool("hello", mcp.WithDescription("says hello"), mcp.WithReadOnlyHintAnnotation(true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("hello " + req.GetString("who", "nobody")), nil
		})
	return srv
}

func httpServer(name, url string) *config.Server {
	return &config.Server{
		Name:             name,
		Transport:        "http",
		URL:              url,
		Timeout:          dur(10 * time.Second),
		ConnectTimeout:   dur(10 * time.Second),
		Protocol:         "2025-11-25",
		MaxResponseBytes: 1 << 20,
	}
}

func TestHTTPTransport(t *testing.T) {
	t.Parallel()
	const secret = "sekret-header-value-123"
	srv := newMCPGoServer()
	keys := &headerLog{name: "X-Api-Key"}
	ts := httptest.NewServer(keys.wrap(server.NewStreamableHTTPServer(srv)))
	t.Cleanup(ts.Close) // after the Conn's Close (cleanups run last-in first-out)

	var logs logBuffer
	cfg := httpServer("web", ts.URL+"/mcp")
	cfg.Headers = map[string]string{"X-Api-Key": secret, "Authorization": "Bearer " + secret}
	c := start(t, cfg, Options{Logger: testLogger(&logs)})
	s := mustConnected(t, c)
	if got := toolNames(s.Tools); !reflect.DeepEqual(got, []string{"hello"}) || !s.Tools[0].ReadOnly {
		t.Fatalf("tools %v", got)
	}
	if s.Instructions != "Over HTTP." || s.ProtocolVersion != "2025-11-25" || !s.Capabilities.ToolsListChanged {
		t.Errorf("snapshot %+v", s)
	}

	raw, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"proxy"}}`))
	if err != nil || !strings.Contains(string(raw), "hello proxy") {
		t.Fatalf("call: %s, %v", raw, err)
	}
	_, err = c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"nope"}`))
	var rpc *RPCError
	if !errors.As(err, &rpc) {
		t.Errorf("unknown tool: err %v, want *RPCError", err)
	}

	// list_changed arrives over the GET stream.
	srv.AddTool(mcp.NewTool("second"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("2"), nil
	})
	waitSnapshot(t, c, 5*time.Second, "second tool", func(s *Snapshot) bool { return len(s.Tools) == 2 })

	_ = c.Close()
	got := keys.all()
	if len(got) < 3 {
		t.Fatalf("server saw %d requests", len(got))
	}
	for _, v := range got {
		if !strings.HasSuffix(v, " "+secret) {
			t.Errorf("request %q lacks the configured header", v)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("secret header value in the log:\n%s", logs.String())
	}
	if len(logs.lines(`"server":"web"`)) == 0 {
		t.Errorf("no log lines at all; the secret check proves nothing")
	}
}

func TestHTTPConnectErrors(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(ts.Close)
	for _, tc := range []struct {
		name, url, ca, want string
	}{
		{"legacy SSE server", ts.URL + "/mcp", "", "set transport: sse"},
		{"nothing listening", "http://127.0.0.1:1/mcp?token=abc123", "", "connection refused"},
		{"CA with plain http", ts.URL + "/mcp", "/does/not/matter.pem", "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := httpServer("bad", tc.url)
			cfg.TLSCACertPath = tc.ca
			c := start(t, cfg, Options{})
			s := c.Snapshot()
			if s.State != StateFailed || s.Err == nil || !strings.Contains(s.Err.Error(), tc.want) {
				t.Fatalf("state %s err %v, want failed with %q", s.State, s.Err, tc.want)
			}
			if strings.Contains(s.Err.Error(), "abc123") {
				t.Errorf("error shows the URL query: %v", s.Err)
			}
		})
	}
}

// writeCA writes the test server's certificate as a PEM file.
func writeCA(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHTTPWithCA(t *testing.T) {
	t.Parallel()
	ts := httptest.NewTLSServer(server.NewStreamableHTTPServer(newMCPGoServer()))
	t.Cleanup(ts.Close)
	cfg := httpServer("tls", ts.URL+"/mcp")
	cfg.TLSCACertPath = writeCA(t, ts)
	c := start(t, cfg, Options{})
	if s := mustConnected(t, c); len(s.Tools) != 1 {
		t.Errorf("tools %v", toolNames(s.Tools))
	}

	// Without the CA the server's certificate is not trusted.
	cfg = httpServer("untrusted", ts.URL+"/mcp")
	c = start(t, cfg, Options{})
	if s := c.Snapshot(); s.State != StateFailed || !strings.Contains(s.Err.Error(), "certificate") {
		t.Errorf("without CA: state %s err %v", s.State, s.Err)
	}
}

func TestSSETransport(t *testing.T) {
	t.Parallel()
	var sse *server.SSEServer
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sse.ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	sse = server.NewSSEServer(newMCPGoServer(), server.WithBaseURL(ts.URL))

	cfg := httpServer("legacy", ts.URL+"/sse")
	cfg.Transport = "sse"
	cfg.Headers = map[string]string{"X-Api-Key": "k"}
	c := start(t, cfg, Options{})
	s := mustConnected(t, c)
	if got := toolNames(s.Tools); !reflect.DeepEqual(got, []string{"hello"}) {
		t.Fatalf("tools %v", got)
	}
	raw, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"sse"}}`))
	if err != nil || !strings.Contains(string(raw), "hello sse") {
		t.Fatalf("call: %s, %v", raw, err)
	}
}

func TestSSEEndpointMustBeHTTPSWithCA(t *testing.T) {
	t.Parallel()
	var sse *server.SSEServer
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sse.ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	// The server advertises its message endpoint on plain http (same host).
	sse = server.NewSSEServer(newMCPGoServer(), server.WithBaseURL("http://"+strings.TrimPrefix(ts.URL, "https://")))

	cfg := httpServer("downgrade", ts.URL+"/sse")
	cfg.Transport = "sse"
	cfg.TLSCACertPath = writeCA(t, ts)
	c := start(t, cfg, Options{})
	s := c.Snapshot()
	if s.State != StateFailed || !strings.Contains(s.Err.Error(), "SSE endpoint") {
		t.Errorf("state %s err %v, want the endpoint refused", s.State, s.Err)
	}
}

// TestHTTPGetStream404: a server with sessions that answers the GET stream
// with 404 (instead of 405) does not offer it; the session stays good.
func TestHTTPGetStream404(t *testing.T) {
	t.Parallel()
	mcpSrv := server.NewStreamableHTTPServer(newMCPGoServer())
	var gets atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			http.NotFound(w, r)
			return
		}
		mcpSrv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c := start(t, httpServer("noget", ts.URL+"/mcp"), Options{})
	mustConnected(t, c)
	for i := range 3 {
		if err := hello(t, c, fmt.Sprint(i)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	waitFor(t, 5*time.Second, "the GET stream asked for", func() bool { return gets.Load() >= 1 })
	if err := hello(t, c, "after"); err != nil {
		t.Fatalf("a call after the GET's 404: %v", err)
	}
}
