package tracing

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-proxy/mcp-proxy/config"
)

var (
	benchParams = json.RawMessage(`{"name":"fx__echo","arguments":{"text":"hello"},"_meta":{"progressToken":3}}`)
	benchHeader = http.Header{"Content-Type": {"application/json"}}
	benchID     = json.RawMessage(`7`)
)

// callPath is what one proxied call does with a Tracer: a server span, a
// client span, trace context into the upstream params and headers, both
// spans ended.
func callPath(ctx context.Context, tr *Tracer) json.RawMessage {
	ctx, srv := tr.StartServer(ctx, ServerRequest{Method: "tools/call", Target: "fx__echo", ID: benchID,
		Params: benchParams, Header: benchHeader, SessionID: "s", Protocol: "2025-11-25", Agent: "default", Transport: TransportTCP})
	srv.SetServer("fx")
	inner := tr.SpanFromContext(ctx)
	inner.SetPolicyRule("")
	inner.SetOutcome(OutcomeOK, 0)
	cctx, cli := tr.StartClient(ctx, ClientRequest{Method: "tools/call", Params: benchParams, ID: "px-1", Server: "fx", Transport: TransportPipe})
	out := tr.InjectMeta(cctx, benchParams)
	if tr.Propagates(cctx) {
		h := http.Header{}
		tr.InjectHeader(cctx, h)
	}
	cli.End(OutcomeOK, 0)
	srv.End("", 0)
	_ = tr.TraceID(ctx)
	return out
}

// TestOffCostsNothing: with tracing off (a nil Tracer) the call path
// allocates nothing and hands the upstream its params untouched.
func TestOffCostsNothing(t *testing.T) {
	var tr *Tracer
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = callPath(ctx, tr) }); n != 0 {
		t.Errorf("tracing off: %.1f allocations per call, want 0", n)
	}
	if out := callPath(ctx, tr); &out[0] != &benchParams[0] || len(out) != len(benchParams) {
		t.Errorf("tracing off changed the params: %s", out)
	}
}

// TestOnInjects is the on counterpart: the same path writes a traceparent.
func TestOnInjects(t *testing.T) {
	tr, _ := memTracer(t)
	out := callPath(context.Background(), tr)
	if tp, _ := metaTraceContext(out); len(tp) != 55 {
		t.Errorf("tracing on: upstream params %s carry no traceparent", out)
	}
}

func BenchmarkCallPathOff(b *testing.B) {
	var tr *Tracer
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		callPath(ctx, tr)
	}
}

// discardExporter drops what it is given.
type discardExporter struct{}

func (discardExporter) export(context.Context, []*spanState) error { return nil }
func (discardExporter) shutdown(context.Context) error             { return nil }

// discardTracer samples every span and exports to discardExporter.
func discardTracer(b *testing.B) *Tracer {
	tr := newTracer(discardExporter{}, sdktrace.ParentBased(sdktrace.AlwaysSample()), testBatch(b), zerolog.Nop(), func(error) {})
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

func BenchmarkCallPathOn(b *testing.B) {
	tr := discardTracer(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		callPath(ctx, tr)
	}
}

// BenchmarkCallPathOTLP is BenchmarkCallPathOn exporting for real, over
// OTLP/HTTP to a local sink that discards, as the load test's tracing
// does. Its cpu-ns/op is the process's CPU (user + system) per call: the
// exporter's goroutine, the sink's share and the GC included.
func BenchmarkCallPathOTLP(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(sink.Close)
	tr, err := New(context.Background(), config.Tracing{Endpoint: sink.URL, Protocol: config.TracingHTTP},
		Options{Logger: zerolog.Nop(), LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		callPath(ctx, tr)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user + system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExportBatch posts a batch of 512 call spans (the batch
// processor's default size; a server span and a client span per call, with
// the attributes the proxy gives them) to a local OTLP/HTTP sink, through
// the SDK's exporter (the same spans as its stubs) and through the proxy's
// (wireExporter). cpu-ns/span is the process's CPU (the sink's included)
// per span.
func BenchmarkExportBatch(b *testing.B) {
	exp := &memExporter{}
	tr := newTracer(exp, sdktrace.AlwaysSample(), testBatch(b), zerolog.Nop(), func(error) {})
	for range 256 {
		callPath(context.Background(), tr)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	spans := exp.spans
	var stubs tracetest.SpanStubs
	for _, st := range spans {
		stubs = append(stubs, stub(st))
	}
	snaps := stubs.Snapshots()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(sink.Close)
	ctx := context.Background()
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(sink.URL + "/v1/traces")}
	b.Run("sdk", func(b *testing.B) {
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = exp.Shutdown(ctx) })
		loopExport(b, len(spans), func() error { return exp.ExportSpans(ctx, snaps) })
	})
	b.Run("wire", func(b *testing.B) {
		exp, err := newWireExporter(ctx, otlptracehttp.NewClient(opts...), resource.Empty(), false, testBatch(b).limits)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = exp.shutdown(ctx) })
		loopExport(b, len(spans), func() error { return exp.export(ctx, spans) })
	})
}

// loopExport runs export, a batch of n spans, as b's loop and reports the
// process's CPU per span.
func loopExport(b *testing.B, n int, export func() error) {
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		if err := export(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N*n), "cpu-ns/span")
}

// BenchmarkInjectMeta splices a client span's traceparent into params
// with a _meta (the benchmarks' calls) and without one.
func BenchmarkInjectMeta(b *testing.B) {
	tr := discardTracer(b)
	ctx, span := tr.StartClient(context.Background(), ClientRequest{Method: "tools/call"})
	defer span.End(OutcomeOK, 0)
	for _, c := range []struct{ name, params string }{
		{"meta", string(benchParams)},
		{"nometa", `{"name":"fx__echo","arguments":{"text":"hello"}}`},
	} {
		params := json.RawMessage(c.params)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.InjectMeta(ctx, params)
			}
		})
	}
}
