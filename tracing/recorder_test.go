package tracing

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// envOf is a LookupEnv over m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestSamplerFrom: OTEL_TRACES_SAMPLER(_ARG) give the SDK's samplers, as
// the SDK reads them; anything else is refused.
func TestSamplerFrom(t *testing.T) {
	for _, c := range []struct {
		name, arg, want string
	}{
		{"", "", sdktrace.ParentBased(sdktrace.AlwaysSample()).Description()},
		{"parentbased_always_on", "", sdktrace.ParentBased(sdktrace.AlwaysSample()).Description()},
		{" Always_On ", "", sdktrace.AlwaysSample().Description()},
		{"always_off", "0.5", sdktrace.NeverSample().Description()},
		{"parentbased_always_off", "", sdktrace.ParentBased(sdktrace.NeverSample()).Description()},
		{"traceidratio", "", sdktrace.TraceIDRatioBased(1).Description()},
		{"traceidratio", "0.25", sdktrace.TraceIDRatioBased(0.25).Description()},
		{"parentbased_traceidratio", " 0 ", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)).Description()},
		{"jaeger_remote", "", ""},
		{"xray", "", ""},
		{"traceidratio", "-0.1", ""},
		{"parentbased_traceidratio", "1.01", ""},
		{"traceidratio", "half", ""},
		{"traceidratio", "NaN", ""},
		{"parentbased_traceidratio", "nan", ""},
	} {
		s, err := samplerFrom(envOf(map[string]string{"OTEL_TRACES_SAMPLER": c.name, "OTEL_TRACES_SAMPLER_ARG": c.arg}))
		if c.want == "" {
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("%q %q: %v, %v; want ErrUnsupported", c.name, c.arg, s, err)
			}
			continue
		}
		if err != nil || s.Description() != c.want {
			t.Errorf("%q %q: %v, %v; want %s", c.name, c.arg, s, err, c.want)
		}
	}
}

// TestBatchConfigFrom: the OTEL_BSP_* and attribute limit variables, their
// defaults, and the values the SDK would not run with.
func TestBatchConfigFrom(t *testing.T) {
	def := batchConfig{delay: 5 * time.Second, timeout: 30 * time.Second, maxQueue: 2048, maxBatch: 512,
		limits: attrLimits{count: 128, valueLen: -1}}
	for _, c := range []struct {
		name    string
		env     map[string]string
		want    func(*batchConfig)
		wantErr string
	}{
		{"none", nil, func(*batchConfig) {}, ""},
		{"all", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": "1000",
			"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
			"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "64", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "8",
			"OTEL_ATTRIBUTE_COUNT_LIMIT": "5"}, func(c *batchConfig) {
			c.delay, c.timeout, c.maxQueue, c.maxBatch = 250*time.Millisecond, time.Second, 100, 10
			c.limits = attrLimits{count: 5, valueLen: 64}
		}, ""},
		{"batch above the queue", map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1000"},
			func(c *batchConfig) { c.maxQueue, c.maxBatch = 100, 100 }, ""},
		{"zero and negative", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "0", "OTEL_BSP_MAX_QUEUE_SIZE": "-1",
			"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "-5", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "0"},
			func(c *batchConfig) { c.limits = attrLimits{count: -1, valueLen: 0} }, ""},
		{"not a number", map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "lots", "OTEL_BSP_SCHEDULE_DELAY": "5s"},
			func(*batchConfig) {}, "OTEL_BSP_SCHEDULE_DELAY"},
	} {
		want := def
		c.want(&want)
		got, err := batchConfigFrom(envOf(c.env))
		if got != want {
			t.Errorf("%s: %+v, want %+v", c.name, got, want)
		}
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.wantErr)
		}
	}
}

// gateExporter records batches; while gate is held, export waits.
type gateExporter struct {
	gate    sync.Mutex
	mu      sync.Mutex
	batches [][]string
	got     chan struct{}
}

func newGateExporter() *gateExporter { return &gateExporter{got: make(chan struct{}, 100)} }

func (g *gateExporter) export(ctx context.Context, spans []*spanState) error {
	g.gate.Lock()
	g.gate.Unlock() //nolint:staticcheck // waits for the test to open the gate
	var names []string
	for _, st := range spans {
		names = append(names, st.name)
	}
	g.mu.Lock()
	g.batches = append(g.batches, names)
	g.mu.Unlock()
	g.got <- struct{}{}
	return nil
}

func (g *gateExporter) shutdown(context.Context) error { return nil }

func (g *gateExporter) seen() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]string(nil), g.batches...)
}

// endN starts and ends n client spans named name-<i>.
func endN(tr *Tracer, name string, n int) {
	for i := range n {
		_, s := tr.StartClient(context.Background(), ClientRequest{Method: name + "-" + string(rune('a'+i))})
		s.End(OutcomeOK, 0)
	}
}

// TestBatcherFullBatchAtOnce: a full batch is exported at once, a partial
// one waits for the schedule delay, and shutdown sends what is left.
func TestBatcherFullBatchAtOnce(t *testing.T) {
	exp := newGateExporter()
	bc := testBatch(t)
	bc.maxBatch, bc.delay = 3, time.Hour
	tr := newTracer(exp, sdktrace.AlwaysSample(), bc, zerolog.Nop(), func(err error) { t.Errorf("report: %v", err) })
	endN(tr, "m", 4)
	select {
	case <-exp.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a full batch was not exported")
	}
	if b := exp.seen(); len(b) != 1 || strings.Join(b[0], ",") != "m-a,m-b,m-c" {
		t.Fatalf("batches %v, want one of the first three spans", b)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := exp.seen(); len(b) != 2 || strings.Join(b[1], ",") != "m-d" {
		t.Errorf("batches %v, want the fourth span sent at shutdown", b)
	}
	endN(tr, "late", 1) // after shutdown: dropped, no panic
}

// TestBatcherDelay: a lone span is exported once the schedule delay has
// passed, without shutdown.
func TestBatcherDelay(t *testing.T) {
	exp := newGateExporter()
	bc := testBatch(t)
	bc.delay = 20 * time.Millisecond
	tr := newTracer(exp, sdktrace.AlwaysSample(), bc, zerolog.Nop(), func(err error) { t.Errorf("report: %v", err) })
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	endN(tr, "lone", 1)
	select {
	case <-exp.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a lone span was not exported after the delay")
	}
}

// waitQueueTaken waits until tr's export goroutine has taken every queued
// span.
func waitQueueTaken(t *testing.T, tr *Tracer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a liveness bound, not a timing
	for {
		tr.batch.mu.Lock()
		n := len(tr.batch.queue)
		tr.batch.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued spans were not taken")
		}
		time.Sleep(time.Millisecond)
	}
}

// reportingTracer samples every span, exports to exp with bc, and keeps
// what the batcher reports (export errors, drops): reported returns it.
func reportingTracer(exp spanExporter, bc batchConfig) (tr *Tracer, reported func() []string) {
	var mu sync.Mutex
	var reports []string
	tr = newTracer(exp, sdktrace.AlwaysSample(), bc, zerolog.Nop(), func(err error) {
		mu.Lock()
		reports = append(reports, err.Error())
		mu.Unlock()
	})
	return tr, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reports)
	}
}

// TestBatcherDropsWhenFull: with the exporter stuck, spans beyond the
// queue are dropped, not waited for, and the drop is reported.
func TestBatcherDropsWhenFull(t *testing.T) {
	exp := newGateExporter()
	exp.gate.Lock()
	bc := testBatch(t)
	bc.maxQueue, bc.maxBatch, bc.delay = 4, 2, time.Hour
	tr, reported := reportingTracer(exp, bc)
	endN(tr, "x", 2) // a full batch: the goroutine takes it and waits at the gate
	waitQueueTaken(t, tr)
	ended := make(chan struct{})
	go func() {
		endN(tr, "y", 7) // 4 fit in the queue, 3 are dropped
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second): // a liveness bound, not a timing
		t.Fatal("ending spans waited for the stuck exporter")
	}
	exp.gate.Unlock()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, b := range exp.seen() {
		total += len(b)
	}
	if total != 6 {
		t.Errorf("%d spans exported, want 6 (2 + a queue of 4)", total)
	}
	if reports := reported(); len(reports) != 1 || !strings.Contains(reports[0], "3 spans dropped") {
		t.Errorf("reports %q, want one of 3 spans dropped", reports)
	}
}

// TestSpanThroughOTelAPI: the span in ctx is usable through
// OpenTelemetry's API, as the SDK's was: its attributes, name and status
// reach the export, a status ranks as the SDK ranks it, and a span ended
// there is ended.
func TestSpanThroughOTelAPI(t *testing.T) {
	tr, exp := memTracer(t)
	ctx, s := tr.StartServer(context.Background(), ServerRequest{Method: "tools/call", Target: "a__b"})
	api := trace.SpanFromContext(ctx)
	if !api.IsRecording() || !api.SpanContext().Equal(trace.SpanContextFromContext(ctx)) || !api.SpanContext().IsSampled() {
		t.Fatalf("the span in ctx: recording %v, context %v", api.IsRecording(), api.SpanContext())
	}
	api.SetAttributes(attribute.String("extra", "1"))
	api.SetName("renamed")
	api.SetStatus(codes.Ok, "ignored")
	api.SetStatus(codes.Error, "lower than Ok")
	s.SetOutcome("denied", 0) // an Error status, below Ok: kept Ok
	api.End()
	if s.IsRecording() || api.IsRecording() {
		t.Error("the span still records after End through the API")
	}
	s.End(OutcomeOK, 0) // a second end: nothing
	spans := ended(t, tr, exp)
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	got := spans[0]
	if got.Name != "renamed" || got.Status.Code != codes.Ok || got.Status.Description != "" ||
		attrMap(got.Attributes)["extra"] != "1" || attrMap(got.Attributes)["mcp_proxy.outcome"] != "denied" {
		t.Errorf("exported %s, status %v, attributes %v", got.Name, got.Status, attrMap(got.Attributes))
	}
}

// TestOverflowAttributesCounted: attributes past what a span holds are
// dropped and counted.
func TestOverflowAttributesCounted(t *testing.T) {
	tr, exp := memTracer(t)
	ctx, s := tr.StartClient(context.Background(), ClientRequest{Method: "m"})
	var kvs []attribute.KeyValue
	for i := range 20 {
		kvs = append(kvs, attribute.Int("k"+string(rune('a'+i)), i))
	}
	if maxMoreAttrs >= 20 {
		t.Fatalf("maxMoreAttrs %d: the test needs more attributes", maxMoreAttrs)
	}
	trace.SpanFromContext(ctx).SetAttributes(kvs...)
	s.End(OutcomeOK, 0)
	spans := ended(t, tr, exp)
	if n, d := len(spans[0].Attributes), spans[0].DroppedAttributes; n != 2+maxMoreAttrs || n+d != 20+2 {
		t.Errorf("%d attributes kept and %d dropped, want %d kept of 22", n, d, 2+maxMoreAttrs)
	}
}

// TestBatcherDropReportsTotal: each drop report carries the number dropped
// since the start as well as since the last report, so that a report the
// error log holds back (one a minute) loses no count.
func TestBatcherDropReportsTotal(t *testing.T) {
	exp := newGateExporter()
	bc := testBatch(t)
	bc.maxQueue, bc.maxBatch, bc.delay = 2, 2, time.Hour
	tr, reported := reportingTracer(exp, bc)
	waitExported := func(n int) {
		for range n {
			select {
			case <-exp.got:
			case <-time.After(10 * time.Second): // a liveness bound, not a timing
				t.Fatal("a batch was not exported")
			}
		}
	}
	waitTaken := func() { waitQueueTaken(t, tr) }
	for round := range 2 {
		exp.gate.Lock()
		endN(tr, "full", 2) // the goroutine takes them and waits at the gate
		waitTaken()
		endN(tr, "more", 3+round) // 2 fit in the queue, the rest are dropped
		exp.gate.Unlock()
		if round == 0 {
			waitExported(2) // the stuck batch, then the queued one, reporting the drop
		}
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if reports := reported(); len(reports) != 2 || !strings.HasPrefix(reports[0], "1 spans dropped (1 since the start)") ||
		!strings.HasPrefix(reports[1], "2 spans dropped (3 since the start)") {
		t.Errorf("reports %q, want 1 dropped (1 since the start), then 2 (3 since the start)", reports)
	}
}

// TestOwnKeysThroughAPI: an attribute of the proxy's own set through
// trace.Span replaces the proxy's value, one of another type replaces it
// too, and the proxy's setter replaces either: each key once, the last
// value.
func TestOwnKeysThroughAPI(t *testing.T) {
	tr, exp := memTracer(t)
	ctx, s := tr.StartServer(context.Background(), ServerRequest{Method: "tools/call", Target: "a__b",
		Transport: TransportTCP, Address: "127.0.0.1", Port: 8080})
	api := trace.SpanFromContext(ctx)
	api.SetAttributes(attribute.String("mcp.method.name", "changed"), attribute.Int("server.port", 9),
		attribute.Int("network.transport", 6), attribute.String("server.port", "x"))
	s.SetServer("first")
	api.SetAttributes(attribute.Bool("mcp_proxy.server", true))
	s.SetServer("last")
	s.End(OutcomeOK, 0)
	spans := ended(t, tr, exp)
	seen := map[string]int{}
	for _, kv := range spans[0].Attributes {
		seen[string(kv.Key)]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s exported %d times", k, n)
		}
	}
	sameMap(t, "server span", attrMap(spans[0].Attributes), map[string]string{
		"mcp.method.name": "changed", "gen_ai.tool.name": "a__b", "gen_ai.operation.name": "execute_tool",
		"network.transport": "6", "server.address": "127.0.0.1", "server.port": "x",
		"mcp_proxy.server": "last", "mcp_proxy.outcome": "ok",
	})
}
