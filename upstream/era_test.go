package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// eraServer is a scripted Streamable HTTP server: server/discover and
// initialize are answered by the test's functions, everything else as a
// server of the era it settled on would. It records every request as
// "<method> <MCP-Protocol-Version header>".
type eraServer struct {
	// discover and initialize answer those methods; nil: -32601.
	discover, initialize func(w http.ResponseWriter, r *http.Request, id json.RawMessage)
	// forget (nil: never) reports whether a request with a session id is
	// answered 404: the server no longer knows the session.
	forget func() bool

	mu   sync.Mutex
	seen []string
	meta []json.RawMessage // the _meta of every request after the handshake
}

func (e *eraServer) log() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

func (e *eraServer) count(method string) int {
	n := 0
	for _, l := range e.log() {
		if strings.HasPrefix(l, method+" ") {
			n++
		}
	}
	return n
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func rpcResult(id json.RawMessage, result string) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`
}

func rpcError(id json.RawMessage, code int, msg, data string) string {
	e := fmt.Sprintf(`{"code":%d,"message":%q`, code, msg)
	if data != "" {
		e += `,"data":` + data
	}
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"error":` + e + `}}`
}

// discoverOK answers server/discover as a 2026-07-28 server does.
func discoverOK(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
	writeJSON(w, 200, rpcResult(id, `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"new","version":"1"}}}`))
}

// initializeOK answers initialize as a 2025-11-25 server does.
func initializeOK(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
	w.Header().Set("Mcp-Session-Id", "s1")
	writeJSON(w, 200, rpcResult(id, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"1"}}`))
}

func (e *eraServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	if e.forget != nil && r.Header.Get("Mcp-Session-Id") != "" && e.forget() {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	e.mu.Lock()
	e.seen = append(e.seen, m.Method+" "+r.Header.Get("Mcp-Protocol-Version"))
	if m.Method != "server/discover" && m.Method != "initialize" && len(m.ID) > 0 {
		e.meta = append(e.meta, m.Params.Meta)
	}
	e.mu.Unlock()
	answer := func(f func(http.ResponseWriter, *http.Request, json.RawMessage)) {
		if f == nil {
			writeJSON(w, 200, rpcError(m.ID, -32601, "Method not found", ""))
			return
		}
		f(w, r, m.ID)
	}
	switch m.Method {
	case "server/discover":
		answer(e.discover)
	case "initialize":
		answer(e.initialize)
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
	case "tools/list":
		writeJSON(w, 200, rpcResult(m.ID, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`))
	default:
		if len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		writeJSON(w, 200, rpcError(m.ID, -32601, "Method not found", ""))
	}
}

// TestEraHTTPDiscover: with protocol auto a Streamable HTTP server is asked
// server/discover first, with the 2026-07-28 headers; one that answers is
// spoken to in that era (no initialize), one that answers as a server of
// the session era does (-32601, -32600, HTTP 400, 404, 405) is initialized.
func TestEraHTTPDiscover(t *testing.T) {
	t.Parallel()
	status := func(code int) func(http.ResponseWriter, *http.Request, json.RawMessage) {
		return func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) { w.WriteHeader(code) }
	}
	rpc := func(code int) func(http.ResponseWriter, *http.Request, json.RawMessage) {
		return func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
			writeJSON(w, 200, rpcError(id, code, "no", ""))
		}
	}
	for _, tc := range []struct {
		name     string
		discover func(http.ResponseWriter, *http.Request, json.RawMessage)
		want     []string // the requests of the handshake and first discovery
		protocol string
	}{
		{"answered", discoverOK, []string{"server/discover 2026-07-28", "tools/list 2026-07-28"}, "2026-07-28"},
		{"-32601", rpc(-32601), []string{"server/discover 2026-07-28", "initialize ", "notifications/initialized 2025-11-25", "tools/list 2025-11-25"}, "2025-11-25"},
		{"-32600", rpc(-32600), []string{"server/discover 2026-07-28", "initialize ", "notifications/initialized 2025-11-25", "tools/list 2025-11-25"}, "2025-11-25"},
		{"HTTP 400", status(400), []string{"server/discover 2026-07-28", "initialize ", "notifications/initialized 2025-11-25", "tools/list 2025-11-25"}, "2025-11-25"},
		{"HTTP 404", status(404), []string{"server/discover 2026-07-28", "initialize ", "notifications/initialized 2025-11-25", "tools/list 2025-11-25"}, "2025-11-25"},
		{"HTTP 405", status(405), []string{"server/discover 2026-07-28", "initialize ", "notifications/initialized 2025-11-25", "tools/list 2025-11-25"}, "2025-11-25"},
		{"answered without supportedVersions", func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
			writeJSON(w, 200, rpcResult(id, `{}`))
		}, []string{"server/discover 2026-07-28", "initialize ", "notifications/initialized 2025-11-25", "tools/list 2025-11-25"}, "2025-11-25"},
		{"offering session-era versions only", func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
			writeJSON(w, 200, rpcResult(id, `{"supportedVersions":["2025-11-25","2025-06-18"],"capabilities":{}}`))
		}, []string{"server/discover 2026-07-28", "initialize ", "notifications/initialized 2025-11-25", "tools/list 2025-11-25"}, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			es := &eraServer{discover: tc.discover, initialize: initializeOK}
			ts := httptest.NewServer(es)
			t.Cleanup(ts.Close)
			cfg := httpServer("era", ts.URL)
			cfg.Protocol = "auto"
			c := start(t, cfg, Options{})
			s := mustConnected(t, c)
			if s.ProtocolVersion != tc.protocol {
				t.Errorf("protocol %q, want %q", s.ProtocolVersion, tc.protocol)
			}
			if got := strings.Join(es.log(), " | "); got != strings.Join(tc.want, " | ") {
				t.Errorf("requests\n got %s\nwant %s", got, strings.Join(tc.want, " | "))
			}
		})
	}
}

// TestEraHTTPDiscoverUnanswered: a server that holds server/discover
// unanswered is initialized after 5 s, within the same attempt.
func TestEraHTTPDiscoverUnanswered(t *testing.T) {
	t.Parallel()
	es := &eraServer{initialize: initializeOK, discover: func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		<-r.Context().Done()
	}}
	ts := httptest.NewServer(es)
	t.Cleanup(ts.Close)
	cfg := httpServer("slow", ts.URL)
	cfg.Protocol = "auto"
	var snaps snapshots
	c := start(t, cfg, Options{OnSnapshot: snaps.add})
	s := mustConnected(t, c)
	if s.ProtocolVersion != "2025-11-25" || es.count("server/discover") != 1 || es.count("initialize") != 1 {
		t.Errorf("protocol %q, requests %v", s.ProtocolVersion, es.log())
	}
	for _, snap := range snaps.list() {
		if snap.State == StateFailed {
			t.Errorf("a failed attempt was published: %v", snap.Err)
		}
	}
}

// TestEraInitializeNamesNewEra: a server of the session era that comes back
// speaking only 2026-07-28, and refuses initialize saying so, is spoken to
// in the new era from then on: initialize is not repeated, on this
// connection or the next.
func TestEraInitializeNamesNewEra(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		init func(w http.ResponseWriter, r *http.Request, id json.RawMessage)
	}{
		{"-32022", func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
			writeJSON(w, 400, rpcError(id, -32022, "Unsupported protocol version", `{"supported":["2026-07-28"],"requested":"2025-11-25"}`))
		}},
		{"method not found: initialize", func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
			writeJSON(w, 200, rpcError(id, -32601, "Method not found: initialize", ""))
		}},
		{"-32020", func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
			writeJSON(w, 400, rpcError(id, -32020, "Mcp-Method header required", ""))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			upgraded := false
			es := &eraServer{}
			es.initialize = func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
				mu.Lock()
				up := upgraded
				mu.Unlock()
				if up {
					tc.init(w, r, id)
					return
				}
				initializeOK(w, r, id)
			}
			es.discover = func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
				mu.Lock()
				up := upgraded
				mu.Unlock()
				if up {
					discoverOK(w, r, id)
					return
				}
				w.WriteHeader(http.StatusNotFound)
			}
			ts := httptest.NewServer(es)
			t.Cleanup(ts.Close)
			cfg := httpServer("upgraded", ts.URL)
			cfg.Protocol = "auto"
			c := start(t, cfg, Options{Backoff: fastRetry})
			if s := mustConnected(t, c); s.ProtocolVersion != "2025-11-25" {
				t.Fatalf("first connection at %q", s.ProtocolVersion)
			}
			// The server is upgraded: the session is gone, the proxy
			// re-initializes (it knows the server as one of the session
			// era), meets the refusal and speaks the new era.
			mu.Lock()
			upgraded = true
			mu.Unlock()
			es.mu.Lock()
			es.forget = func() bool { return true }
			es.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.Request(ctx, "tools/list", nil); err != nil {
				t.Fatalf("tools/list across the upgrade: %v", err)
			}
			if s := c.Snapshot(); s.State != StateConnected || s.ProtocolVersion != "2026-07-28" {
				t.Fatalf("after the upgrade: %s at %q", s.State, s.ProtocolVersion)
			}
			inits := es.count("initialize")
			// The next connection asks server/discover, not initialize.
			s, err := c.connect(ctx)
			if err != nil {
				t.Fatalf("reconnect: %v", err)
			}
			s.close()
			if n := es.count("initialize"); n != inits || s.protocol != "2026-07-28" {
				t.Errorf("reconnect at %q; initialize asked again after the server named the new era:\n%s", s.protocol, strings.Join(es.log(), "\n"))
			}
		})
	}
}

// TestEraStdioExitOnDiscover: a stdio server that exits on the request it
// does not know is respawned once for initialize, which is no failed
// attempt; its next connections are not probed again.
func TestEraStdioExitOnDiscover(t *testing.T) {
	t.Parallel()
	trace := filepath.Join(t.TempDir(), "trace")
	cfg := fakeServer(t, "exiter", "exitondiscover")
	cfg.Env["UPSTREAM_FAKE_TRACE"] = trace
	cfg.Protocol = "auto"
	var snaps snapshots
	c := start(t, cfg, Options{OnSnapshot: snaps.add, Backoff: fastRetry})
	s := mustConnected(t, c)
	if s.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocol %q", s.ProtocolVersion)
	}
	for _, snap := range snaps.list() {
		if snap.State == StateFailed {
			t.Errorf("a failed attempt was published: %v", snap.Err)
		}
	}
	// The child exits; the reconnect goes straight to initialize.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.Request(ctx, "tools/call", json.RawMessage(`{"name":"exit"}`))
	waitFor(t, 15*time.Second, "a third process", func() bool { return strings.Count(readFile(t, trace), "start\n") >= 3 })
	waitSnapshot(t, c, 15*time.Second, "connected again", func(s *Snapshot) bool { return s.State == StateConnected })
	got := readFile(t, trace)
	if n := strings.Count(got, "server/discover\n"); n != 1 {
		t.Errorf("server/discover asked %d times, want once:\n%s", n, got)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestStdioOwnErrorNotTheLimit: only a response the proxy cut for its size
// is a *ResponseTooLargeError; a server's own error answer is relayed as
// the server's, whatever its text says.
func TestStdioOwnErrorNotTheLimit(t *testing.T) {
	t.Parallel()
	c := start(t, fakeServer(t, "liar"), Options{})
	mustConnected(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"fail_like_limit"}`))
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32000 || errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("the server's own error: %v, want it as an *RPCError", err)
	}
	_, err = c.Request(ctx, "tools/call", json.RawMessage(`{"name":"big"}`))
	var tl *ResponseTooLargeError
	if !errors.As(err, &tl) || tl.Limit != 1<<20 {
		t.Errorf("an over-long response: %v, want *ResponseTooLargeError at 1 MiB", err)
	}
}
