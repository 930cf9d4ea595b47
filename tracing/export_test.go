package tracing

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// bodySink is an OTLP/HTTP collector that keeps every request body.
type bodySink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newBodySink(t *testing.T) *bodySink {
	s := &bodySink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *bodySink) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bodies
	s.bodies = nil
	return b
}

// wireBatches are ended spans with everything OTLP carries: every
// attribute type, long values (lengths of two and three bytes), events,
// links, the three statuses, remote and local parents, trace state,
// dropped counts, two scopes of one resource, no resource, the zero scope.
func wireBatches(t *testing.T) [][]sdktrace.ReadOnlySpan {
	t.Helper()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.41.0",
		attribute.String("service.name", "mcp-proxy"), attribute.String("service.version", "1.2.3"),
		attribute.Int("r.int", 7))
	scope := instrumentation.Scope{Name: instrumentationName, SchemaURL: "https://opentelemetry.io/schemas/1.41.0"}
	other := instrumentation.Scope{Name: "other", Version: "v2", SchemaURL: "https://example.com/s",
		Attributes: attribute.NewSet(attribute.Bool("scoped", true))}
	ts, err := trace.ParseTraceState("vendor=a1,other=b2")
	if err != nil {
		t.Fatal(err)
	}
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	server := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, TraceState: ts})
	client := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{9, 10, 11, 12, 13, 14, 15, 16}})
	start := time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.UTC)
	every := []attribute.KeyValue{
		attribute.String("s", "tools/call"), attribute.String("empty", ""), attribute.String("long", strings.Repeat("x", 200)),
		attribute.String("longer", strings.Repeat("y", 20000)),
		attribute.Bool("t", true), attribute.Bool("f", false),
		attribute.Int64("zero", 0), attribute.Int64("neg", -42), attribute.Int64("max", math.MaxInt64),
		attribute.Float64("f0", 0), attribute.Float64("pi", 3.25), attribute.Float64("nan", math.NaN()),
		attribute.ByteSlice("bytes", []byte{0, 1, 2}), attribute.ByteSlice("nobytes", nil),
		attribute.StringSlice("ss", []string{"a", "", "c"}), attribute.Int64Slice("is", []int64{1, -1}),
		attribute.Float64Slice("fs", []float64{0.5}), attribute.BoolSlice("bs", []bool{true, false}),
		attribute.StringSlice("nostrings", nil),
		attribute.Slice("mixed", attribute.StringValue("x"), attribute.Int64Value(3), attribute.MapValue(attribute.Bool("in", true))),
		attribute.Map("map", attribute.String("k", "v"), attribute.Slice("deep", attribute.Float64Value(1))),
		{Key: "nothing", Value: attribute.Value{}},
		{Key: "", Value: attribute.StringValue("keyless")},
	}
	spans := tracetest.SpanStubs{
		{
			Name: "tools/call fx__echo", SpanContext: server, Parent: remote, SpanKind: trace.SpanKindServer,
			StartTime: start, EndTime: start.Add(201 * time.Microsecond), Attributes: every,
			Events: []sdktrace.Event{
				{Name: "exception", Time: start.Add(time.Microsecond), Attributes: []attribute.KeyValue{attribute.String("exception.type", "x")}, DroppedAttributeCount: 2},
				{Name: "", Time: time.Time{}},
			},
			Links: []sdktrace.Link{
				{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.Int("n", 1)}, DroppedAttributeCount: 1},
				{SpanContext: client},
			},
			Status:            sdktrace.Status{Code: codes.Error, Description: "-32602"},
			DroppedAttributes: 3, DroppedEvents: 4, DroppedLinks: 5, ChildSpanCount: 1,
			Resource: res, InstrumentationScope: scope,
		},
		{
			Name: "tools/call echo", SpanContext: client, Parent: server, SpanKind: trace.SpanKindClient,
			StartTime: start.Add(5 * time.Microsecond), EndTime: start.Add(190 * time.Microsecond),
			Attributes: []attribute.KeyValue{attribute.String("mcp.method.name", "tools/call")},
			Status:     sdktrace.Status{Code: codes.Ok}, Resource: res, InstrumentationScope: scope,
		},
		{Name: "other", SpanContext: client, SpanKind: trace.SpanKindInternal, StartTime: start, EndTime: start,
			Resource: res, InstrumentationScope: other},
		{Name: "more", SpanContext: server, SpanKind: trace.SpanKindProducer, Resource: res, InstrumentationScope: scope},
	}.Snapshots()
	return [][]sdktrace.ReadOnlySpan{
		spans,
		tracetest.SpanStubs{{Name: "bare", SpanContext: client, SpanKind: trace.SpanKindConsumer}}.Snapshots(),
		tracetest.SpanStubs{{Name: "unspecified", SpanContext: client, SpanKind: trace.SpanKind(99), Resource: res}}.Snapshots(),
		nil,
	}
}

// TestWireMatchesSDK: the proxy's protobuf exporter posts, for the same
// spans, the very bytes the SDK's OTLP/HTTP exporter posts.
func TestWireMatchesSDK(t *testing.T) {
	clearOTELEnv(t)
	ctx := context.Background()
	sdkSink, wireSink := newBodySink(t), newBodySink(t)
	sdkExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sdkSink.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	wireExp, err := newWireExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(wireSink.srv.URL+"/v1/traces")))
	if err != nil {
		t.Fatal(err)
	}
	for i, batch := range wireBatches(t) {
		if err := sdkExp.ExportSpans(ctx, batch); err != nil {
			t.Fatalf("batch %d: SDK exporter: %v", i, err)
		}
		if err := wireExp.ExportSpans(ctx, batch); err != nil {
			t.Fatalf("batch %d: wire exporter: %v", i, err)
		}
		want, got := sdkSink.take(), wireSink.take()
		if len(got) != len(want) {
			t.Fatalf("batch %d: %d requests, the SDK's exporter %d", i, len(got), len(want))
		}
		for j := range want {
			if !bytes.Equal(got[j], want[j]) {
				t.Errorf("batch %d: request body differs from the SDK exporter's:\n got %x\nwant %x", i, got[j], want[j])
			}
		}
	}
	for _, e := range []sdktrace.SpanExporter{sdkExp, wireExp} {
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("second Shutdown: %v", err)
		}
	}
}

// sinkExporter is a wire exporter posting over OTLP/HTTP to a bodySink,
// with no OTEL_* variable in force; it is shut down when the test ends.
func sinkExporter(t *testing.T) (*wireExporter, *bodySink) {
	t.Helper()
	clearOTELEnv(t)
	sink := newBodySink(t)
	exp, err := newWireExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(sink.srv.URL+"/v1/traces")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	return exp, sink
}

// TestWireValidUTF8: a span whose texts are not UTF-8 (an upstream's error
// message, a tool name) is posted with each bad run replaced by U+FFFD, in
// a request a collector can unmarshal, along with the rest of its batch.
func TestWireValidUTF8(t *testing.T) {
	ctx := context.Background()
	exp, sink := sinkExporter(t)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	const bad = "a\xff\xfeb"
	scope := instrumentation.Scope{Name: "scope" + bad, Version: bad}
	res := resource.NewSchemaless(attribute.String("r"+bad, bad))
	spans := tracetest.SpanStubs{
		{Name: "tools/call " + bad, SpanContext: sc, Resource: res, InstrumentationScope: scope,
			Attributes: []attribute.KeyValue{attribute.String("k"+bad, bad), attribute.StringSlice("ss", []string{bad})},
			Events:     []sdktrace.Event{{Name: bad}},
			Status:     sdktrace.Status{Code: codes.Error, Description: bad}},
		{Name: "fine", SpanContext: sc, Resource: res, InstrumentationScope: scope},
	}.Snapshots()
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	bodies := sink.take()
	if len(bodies) != 1 {
		t.Fatalf("%d requests, want 1", len(bodies))
	}
	var req collectortracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(bodies[0], &req); err != nil {
		t.Fatalf("the collector cannot read the request: %v", err)
	}
	const good = "a\uFFFDb"
	rs := req.ResourceSpans[0]
	ss := rs.ScopeSpans[0]
	s := ss.Spans[0]
	got := []string{rs.Resource.Attributes[0].Key, rs.Resource.Attributes[0].Value.GetStringValue(),
		ss.Scope.Name, ss.Scope.Version, s.Name, s.Attributes[0].Key, s.Attributes[0].Value.GetStringValue(),
		s.Attributes[1].Value.GetArrayValue().Values[0].GetStringValue(), s.Events[0].Name, s.Status.Message}
	want := []string{"r" + good, good, "scope" + good, good, "tools/call " + good, "k" + good, good, good, good, good}
	if !slices.Equal(got, want) {
		t.Errorf("texts\n got %q\nwant %q", got, want)
	}
	if len(ss.Spans) != 2 || ss.Spans[1].Name != "fine" {
		t.Errorf("the batch's other span is not there: %v", ss.Spans)
	}
}

// TestWireBufferBounded: the buffer the wire exporter keeps between batches
// does not keep the size of a batch of huge values (a 32 MB tool name makes
// a span name and an attribute that long); an ordinary batch's is kept.
func TestWireBufferBounded(t *testing.T) {
	ctx := context.Background()
	exp, sink := sinkExporter(t)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	huge := strings.Repeat("n", 8<<20)
	for _, c := range []struct {
		name   string
		target string
		keep   bool
	}{{"huge", huge, false}, {"ordinary", "echo", true}} {
		spans := tracetest.SpanStubs{{Name: "tools/call " + c.target, SpanContext: sc,
			Attributes: []attribute.KeyValue{attribute.String("gen_ai.tool.name", c.target)}}}.Snapshots()
		if err := exp.ExportSpans(ctx, spans); err != nil {
			t.Fatal(err)
		}
		if b := sink.take(); len(b) != 1 || len(b[0]) < 2*len(c.target) {
			t.Fatalf("%s: %d requests, want 1 with the span", c.name, len(b))
		}
		exp.mu.Lock()
		kept := cap(exp.buf)
		exp.mu.Unlock()
		if kept > maxKeptBuf || c.keep && kept == 0 {
			t.Errorf("after the %s batch the exporter keeps a buffer of %d bytes, want at most %d and, for an ordinary batch, one", c.name, kept, maxKeptBuf)
		}
	}
}

// recordingClient is an otlptrace.Client that keeps the span messages of
// each upload and what they held while it was running.
type recordingClient struct {
	msgs  [][]*tracepb.Span
	bytes [][]byte
}

func (c *recordingClient) Start(context.Context) error { return nil }
func (c *recordingClient) Stop(context.Context) error  { return nil }

func (c *recordingClient) UploadTraces(_ context.Context, req []*tracepb.ResourceSpans) error {
	var msgs []*tracepb.Span
	for _, rs := range req {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				msgs = append(msgs, s)
				c.bytes = append(c.bytes, slices.Clone(s.ProtoReflect().GetUnknown()))
			}
		}
	}
	c.msgs = append(c.msgs, msgs)
	return nil
}

// TestWireReusesMessages: the span messages of a batch are the previous
// batch's, and once the client is done with a batch they hold none of its
// bytes.
func TestWireReusesMessages(t *testing.T) {
	ctx := context.Background()
	client := &recordingClient{}
	exp, err := newWireExporter(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	for _, names := range [][]string{{"tools/call a", "tools/call b"}, {"tools/call c", "tools/call d"}} {
		var stubs tracetest.SpanStubs
		for _, n := range names {
			stubs = append(stubs, tracetest.SpanStub{Name: n, SpanContext: sc})
		}
		if err := exp.ExportSpans(ctx, stubs.Snapshots()); err != nil {
			t.Fatal(err)
		}
	}
	if len(client.msgs) != 2 || len(client.msgs[0]) != 2 || len(client.msgs[1]) != 2 {
		t.Fatalf("uploads of %v span messages, want two of 2", client.msgs)
	}
	for i, m := range client.msgs[1] {
		if m != client.msgs[0][i] {
			t.Errorf("span message %d of the second batch is a new one", i)
		}
		if u := m.ProtoReflect().GetUnknown(); len(u) != 0 {
			t.Errorf("span message %d still holds %d bytes after its upload", i, len(u))
		}
	}
	for i, b := range client.bytes {
		if want := []string{"a", "b", "c", "d"}[i]; !bytes.Contains(b, []byte("tools/call "+want)) {
			t.Errorf("upload of span %d held %q, want the span named tools/call %s", i, b, want)
		}
	}
}
