package downstream

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// benchIssuer is an OAuth authorization server on a loopback port for the
// listener's OAuth: its metadata names its JWKS, and it signs ES256 access
// tokens itself.
type benchIssuer struct {
	url string
	key *ecdsa.PrivateKey
}

func newBenchIssuer(b testing.TB) *benchIssuer {
	b.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	is := &benchIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.url, "jwks_uri": is.url + "/jwks",
			"authorization_endpoint": is.url + "/authorize", "token_endpoint": is.url + "/token"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

// token signs an access token of subject for audience with scope mcp.
func (is *benchIssuer) token(b testing.TB, subject, audience string) string {
	b.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader(jose.HeaderKey("kid"), "k1"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: is.url, Subject: subject, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour)), ID: rand.Text()}).
		Claims(map[string]any{"scope": "mcp", "client_id": "bench"}).Serialize()
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

// httpBenchYAML is the bare config of BenchmarkHTTPHandlerCall.
const httpBenchYAML = `
startup_wait: 2s
blobs: {mode: passthrough}
pinning: off
servers:
  fx:
    command: fixture
    timeout: 5s
`

// httpBenchConfigs are the sides of the HTTP benchmarks: the bare proxy, and
// with the listener's OAuth (a JWT on every request and an agent whose
// match names the token's subject: the load test's features-each-http
// oauth side). Each returns the config and the Authorization header.
var httpBenchConfigs = []struct {
	name string
	with func(b *testing.B) (yaml, authorization string)
}{
	{"bare", func(*testing.B) (string, string) { return httpBenchYAML, "" }},
	{"oauth", func(b *testing.B) (string, string) {
		is := newBenchIssuer(b)
		return httpBenchYAML + `
listen:
  auth: {issuer: "` + is.url + `", audience: bench}
bundles: {all: {servers: [fx]}}
agents:
  load: {mcp_bundles: [all], match: {sub: bench-user}}
default_agent: load
`, "Bearer " + is.token(b, "bench-user", "bench")
	}},
}

// benchHTTPProxy is a proxy of yaml with metrics, over server fx, an
// upstream that answers at once.
func benchHTTPProxy(b *testing.B, yaml string) *Proxy {
	up := connected(`{"name":"echo","description":"Echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`)
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello"}],"structuredContent":{"echo":"hello"}}`)
	up.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return result, nil }
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	p := New(Options{Config: parseConfig(b, yaml), Upstreams: map[string]Upstream{"fx": up}, Logger: zerolog.Nop(), Version: "test", Metrics: m})
	p.Refresh()
	return p
}

// benchCallBody is the body of tools/call number i of echo.
func benchCallBody(i int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hello"}}}`)
}

// benchSession opens a session with post (which returns the status, the
// session id header and the body) and checks a first call.
func benchSession(b *testing.B, post func(sid string, body []byte) (int, string, string)) string {
	code, sid, body := post("", []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`))
	if code != http.StatusOK || sid == "" {
		b.Fatalf("initialize: %d %s", code, body)
	}
	if code, _, body := post(sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); code != http.StatusAccepted {
		b.Fatalf("initialized: %d %s", code, body)
	}
	if code, _, body := post(sid, benchCallBody(0)); code != http.StatusOK || !strings.Contains(body, `"text":"hello"`) {
		b.Fatalf("first call: %d %s", code, body)
	}
	return sid
}

// BenchmarkHTTPHandlerCall is one tools/call of an open Streamable HTTP
// session through the listener's handler, called in the benchmark's
// goroutine (no sockets, no net/http connection; the request is the one a
// connection would hand over, its local address in its context), against
// an upstream that answers at once: the proxy's own CPU and allocations of
// the HTTP side, for each of httpBenchConfigs. The request and recorder
// the benchmark makes are counted too.
func BenchmarkHTTPHandlerCall(b *testing.B) {
	for _, c := range httpBenchConfigs {
		b.Run(c.name, func(b *testing.B) {
			yaml, authorization := c.with(b)
			const bound = "127.0.0.1:8080"
			h := benchHTTPProxy(b, yaml).HTTPHandler(bound)
			local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
			ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, net.Addr(local))
			post := func(sid string, body []byte) (int, string, string) {
				r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://"+bound+"/mcp", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				if authorization != "" {
					r.Header.Set("Authorization", authorization)
				}
				if sid != "" {
					r.Header.Set("Mcp-Session-Id", sid)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code, w.Header().Get("Mcp-Session-Id"), w.Body.String()
			}
			sid := benchSession(b, post)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				post(sid, benchCallBody(i))
			}
		})
	}
}

// BenchmarkHTTPLoopbackCall is one tools/call at a time of an open
// Streamable HTTP session over a loopback connection (kept alive) to the
// listener, against an upstream that answers at once, for each of
// httpBenchConfigs. cpu-ns/op is the process's CPU (user + system, the
// client's included) per call, which other processes move less than the
// wall time.
func BenchmarkHTTPLoopbackCall(b *testing.B) {
	for _, c := range httpBenchConfigs {
		b.Run(c.name, func(b *testing.B) {
			yaml, authorization := c.with(b)
			srv := httptest.NewUnstartedServer(nil)
			srv.Config.Handler = benchHTTPProxy(b, yaml).HTTPHandler(srv.Listener.Addr().String())
			srv.Start()
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			post := func(sid string, body []byte) (int, string, string) {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				if authorization != "" {
					req.Header.Set("Authorization", authorization)
				}
				if sid != "" {
					req.Header.Set("Mcp-Session-Id", sid)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
			}
			sid := benchSession(b, post)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuClock(b)
			for i := 1; i <= b.N; i++ {
				post(sid, benchCallBody(i))
			}
			b.StopTimer()
			reportCPU(b, cpu0)
		})
	}
}
