package downstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/audit"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/tracing"
)

// BenchmarkStdioCallFeatures is BenchmarkStdioCall with one feature of a
// deployment on at a time (the load test's features-each-stdio, in
// process): what each adds to a call's CPU and allocations. Run with
// -cpuprofile and -memprofile on one sub-benchmark to see where.
func BenchmarkStdioCallFeatures(b *testing.B) {
	base := `
startup_wait: 2s
blobs: {mode: passthrough}
pinning: off
servers:
  fx:
    command: fixture
    timeout: 5s
`
	for _, c := range []struct {
		name string
		yaml string
		opts func(b *testing.B, cfg *config.Config, o *Options)
	}{
		{name: "bare", yaml: base},
		{name: "audit", yaml: base, opts: func(b *testing.B, _ *config.Config, o *Options) {
			log, err := audit.New(config.Audit{Path: filepath.Join(b.TempDir(), "audit.jsonl"), MaxBytes: 100 << 20, MaxFiles: 2,
				Arguments: config.AuditArgumentsDigest}, audit.Options{Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = log.Close(context.Background()) })
			o.Audit = log
		}},
		{name: "tracing", yaml: base, opts: func(b *testing.B, _ *config.Config, o *Options) {
			sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
			}))
			b.Cleanup(sink.Close)
			tr, err := tracing.New(context.Background(), config.Tracing{Endpoint: sink.URL, Protocol: "http/protobuf"},
				tracing.Options{Logger: zerolog.Nop(), LookupEnv: func(string) (string, bool) { return "", false }})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			o.Tracer = tr
		}},
		{name: "ratelimit", yaml: base + `
bundles: {all: {servers: [fx]}}
agents:
  bot: {mcp_bundles: [all], limits: [{tools: ["*"], per_minute: 1000000000}]}
default_agent: bot
`},
		{name: "override", yaml: base + `
    tools:
      overrides:
        echo: {title: Echo, description: Say it back., annotations: {readOnlyHint: true}}
`},
		{name: "pinning", yaml: strings.Replace(base, "pinning: off", "pinning: quarantine\nscan: warn", 1), opts: func(b *testing.B, cfg *config.Config, o *Options) {
			guard, err := integrity.Open(integrity.Options{StateDir: cfg.StateDir}, integrity.PinningServers(cfg))
			if err != nil {
				b.Fatal(err)
			}
			o.Integrity = guard
		}},
		{name: "metrics", yaml: base, opts: func(b *testing.B, _ *config.Config, o *Options) {
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			o.Metrics = m
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			yaml := c.yaml
			if c.name == "pinning" {
				yaml = "state_dir: " + b.TempDir() + "\n" + yaml
			}
			b.ReportAllocs()
			benchStdioCallWith(b, yaml, "fx__echo", func(o *Options) {
				if c.opts != nil {
					c.opts(b, o.Config, o)
				}
			})
		})
	}
}
