package main

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/authn"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// httpLimits are the server-level bounds of the proxy's HTTP listeners (the
// MCP endpoint and the metrics listener), so that idle or slow clients
// cannot hold connections and goroutines without end.
//
// The body limit is http.Server.ReadTimeout, which bounds reading the
// headers and the body: net/http lifts that deadline once the body has been
// read to its end (or at once for a request without one), so it never cuts
// a long tool call or a stream. There is deliberately no WriteTimeout: it
// would cut every response after it, a 600 s tool call's reply and every
// SSE stream included. A response's write deadline belongs to the request
// (the downstream sets it from the call's own timeout; none on a stream).
type httpLimits struct {
	header         time.Duration // reading the request line and headers
	body           time.Duration // reading the whole request, headers and body
	idle           time.Duration // a kept-alive connection waiting for its next request
	maxHeaderBytes int           // request line and headers
}

// defaultHTTPLimits: headers come at once from every real client (10 s
// stops slowloris); 60 s lets a 32 MiB body through a slow link; 120 s of
// idleness outlasts clients' own keep-alive reuse; 64 KiB of headers holds
// any bearer token or JWT.
var defaultHTTPLimits = httpLimits{
	header:         10 * time.Second,
	body:           60 * time.Second,
	idle:           120 * time.Second,
	maxHeaderBytes: 64 << 10,
}

// newHTTPServer is the http.Server of one listener, with the limits l.
func newHTTPServer(h http.Handler, l httpLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.header,
		ReadTimeout:       l.body,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    l.maxHeaderBytes,
	}
}

// metricsHandler serves metrics.path (behind a bearer token when
// metrics.tokens is set), /healthz and /readyz (always open to probes), all
// behind the MCP endpoint's DNS rebinding checks: on a loopback listener
// the Host must be a loopback name, and a browser's Origin must match.
func metricsHandler(cfg *config.Config, g prometheus.Gatherer, healthz, readyz http.HandlerFunc) http.Handler {
	var m http.Handler = metrics.Handler(g)
	if tokens := cfg.Metrics.Tokens; len(tokens) > 0 {
		next := m
		m = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !authn.StaticBearer(r.Header.Get("Authorization"), tokens) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-proxy metrics"`)
				http.Error(w, "Unauthorized: a valid bearer token is required", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle(cfg.Metrics.Path, m)
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("/readyz", readyz)
	return httpguard.Rebinding(mux)
}
