package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
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
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
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

// endedSpan is a span as the recorder hands it to an exporter.
func endedSpan(name string, sc, parent trace.SpanContext, kind trace.SpanKind, start, end time.Time, attrs []attribute.KeyValue, code codes.Code, text string) *spanState {
	st := &spanState{sc: sc, parent: parent, kind: kind, name: name, start: start, end: end}
	st.status, st.statusText = code, text
	st.more = attrs // every one, past what a live span keeps
	st.ended.Store(true)
	return st
}

// wireResource is the resource of the wire tests' spans.
var wireResource = resource.NewWithAttributes("https://opentelemetry.io/schemas/1.41.0",
	attribute.String("service.name", "mcp-proxy"), attribute.String("service.version", "1.2.3"),
	attribute.Int("r.int", 7))

// wireBatches are ended spans with everything the recorder's spans carry:
// every attribute type, long values (lengths of two and three bytes), the
// three statuses, remote and local parents and none, trace state, every
// kind; and an empty batch.
func wireBatches(t *testing.T) [][]*spanState {
	t.Helper()
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
	}
	return [][]*spanState{
		{
			endedSpan("tools/call fx__echo", server, remote, trace.SpanKindServer, start, start.Add(201*time.Microsecond), every, codes.Error, "-32602"),
			endedSpan("tools/call echo", client, server, trace.SpanKindClient, start.Add(5*time.Microsecond), start.Add(190*time.Microsecond),
				[]attribute.KeyValue{attribute.String("mcp.method.name", "tools/call")}, codes.Ok, ""),
			endedSpan("other", client, trace.SpanContext{}, trace.SpanKindInternal, start, start, nil, codes.Unset, ""),
			endedSpan("more", server, client, trace.SpanKindProducer, time.Time{}, time.Time{}, nil, codes.Unset, ""),
		},
		{endedSpan("bare", client, trace.SpanContext{}, trace.SpanKindConsumer, start, start, nil, codes.Unset, "")},
		{endedSpan("unspecified", client, trace.SpanContext{}, trace.SpanKind(99), start, start, nil, codes.Unset, "")},
		nil,
	}
}

// sdkStubs are spans as the SDK would have ended them, of the proxy's
// instrumentation scope and res.
func sdkStubs(spans []*spanState, res *resource.Resource) []sdktrace.ReadOnlySpan {
	var stubs tracetest.SpanStubs
	for _, st := range spans {
		s := stub(st)
		s.Resource = res
		s.InstrumentationScope = instrumentation.Scope{Name: instrumentationName, SchemaURL: semconv.SchemaURL}
		stubs = append(stubs, s)
	}
	return stubs.Snapshots()
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
	wireExp, err := newWireExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(wireSink.srv.URL+"/v1/traces")),
		wireResource, false, testBatch(t).limits)
	if err != nil {
		t.Fatal(err)
	}
	for i, batch := range wireBatches(t) {
		if err := sdkExp.ExportSpans(ctx, sdkStubs(batch, wireResource)); err != nil {
			t.Fatalf("batch %d: SDK exporter: %v", i, err)
		}
		if err := wireExp.export(ctx, batch); err != nil {
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
	if err := sdkExp.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	for range 2 {
		if err := wireExp.shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
}

// TestWireJSON: over http/json the collector receives the messages that
// http/protobuf sends, in OTLP's JSON encoding.
func TestWireJSON(t *testing.T) {
	clearOTELEnv(t)
	ctx := context.Background()
	pbSink, jsonSink := newBodySink(t), newBodySink(t)
	pbExp, err := newWireExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(pbSink.srv.URL+"/v1/traces")),
		wireResource, false, testBatch(t).limits)
	if err != nil {
		t.Fatal(err)
	}
	jsonExp, err := newWireExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(jsonSink.srv.URL+"/v1/traces"),
		otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON)), wireResource, true, testBatch(t).limits)
	if err != nil {
		t.Fatal(err)
	}
	batch := wireBatches(t)[0]
	for _, e := range []*wireExporter{pbExp, jsonExp} {
		if err := e.export(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	pb, js := pbSink.take(), jsonSink.take()
	if len(pb) != 1 || len(js) != 1 {
		t.Fatalf("%d protobuf and %d JSON requests, want 1 each", len(pb), len(js))
	}
	var want, got collectortracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(pb[0], &want); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(js[0], &got); err != nil {
		t.Fatalf("the collector cannot read the JSON request: %v\n%s", err, js[0])
	}
	// OTLP's JSON writes ids in hex (the client's in capitals), where
	// protojson reads base64, and
	// leaves an empty bytes value out: the ids are compared as hex, then
	// cleared, and the empty bytes attribute left out of both.
	normalize := func(req *collectortracepb.ExportTraceServiceRequest, hexIDs bool) {
		for _, s := range req.ResourceSpans[0].ScopeSpans[0].Spans {
			if hexIDs {
				for _, id := range [][]byte{s.TraceId, s.SpanId, s.ParentSpanId} {
					if len(id) > 0 && !bytes.Contains(bytes.ToLower(js[0]), []byte(`"`+hex.EncodeToString(id)+`"`)) {
						t.Errorf("the JSON request has no id %x", id)
					}
				}
			}
			s.TraceId, s.SpanId, s.ParentSpanId = nil, nil, nil
			s.Attributes = slices.DeleteFunc(s.Attributes, func(kv *commonpb.KeyValue) bool { return kv.Key == "nobytes" })
		}
	}
	normalize(&want, true)
	normalize(&got, false)
	if !proto.Equal(&got, &want) {
		t.Errorf("the JSON request holds\n%v\nthe protobuf one\n%v", &got, &want)
	}
	if n := len(got.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()); n != len(batch) {
		t.Errorf("%d spans in the JSON request, want %d", n, len(batch))
	}
}

// TestWireLimits: the span attribute limits of the OTel variables cut
// what the SDK's spans would: the attributes past the count (counted as
// dropped), and string values past the length in characters.
func TestWireLimits(t *testing.T) {
	clearOTELEnv(t)
	ctx := context.Background()
	attrs := []attribute.KeyValue{
		attribute.String("a", "héllo wörld"), attribute.StringSlice("b", []string{"abcdefgh", "ab"}),
		attribute.Int64("c", 123456789), attribute.String("d", "dropped"), attribute.String("e", "dropped too"),
	}
	lim := attrLimits{count: 3, valueLen: 4}

	// The SDK's span with the same limits, exported by the SDK's exporter.
	sdkSink, wireSink := newBodySink(t), newBodySink(t)
	sdkExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sdkSink.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(sdkExp), sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
		AttributeCountLimit: lim.count, AttributeValueLengthLimit: lim.valueLen,
		EventCountLimit: -1, LinkCountLimit: -1, AttributePerEventCountLimit: -1, AttributePerLinkCountLimit: -1}))
	_, span := tp.Tracer("t").Start(ctx, "s")
	span.SetAttributes(attrs...)
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	wireExp, err := newWireExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(wireSink.srv.URL+"/v1/traces")),
		resource.Empty(), false, lim)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	if err := wireExp.export(ctx, []*spanState{endedSpan("s", sc, trace.SpanContext{}, trace.SpanKindInternal, time.Now(), time.Now(), attrs, codes.Unset, "")}); err != nil {
		t.Fatal(err)
	}
	span1 := func(body [][]byte) *tracepb.Span {
		t.Helper()
		var req collectortracepb.ExportTraceServiceRequest
		if len(body) != 1 {
			t.Fatalf("%d requests, want 1", len(body))
		}
		if err := proto.Unmarshal(body[0], &req); err != nil {
			t.Fatal(err)
		}
		return req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	}
	want, got := span1(sdkSink.take()), span1(wireSink.take())
	if !proto.Equal(&tracepb.Span{Attributes: got.Attributes, DroppedAttributesCount: got.DroppedAttributesCount},
		&tracepb.Span{Attributes: want.Attributes, DroppedAttributesCount: want.DroppedAttributesCount}) {
		t.Errorf("attributes %v, %d dropped; the SDK's %v, %d dropped", got.Attributes, got.DroppedAttributesCount, want.Attributes, want.DroppedAttributesCount)
	}
	if got.DroppedAttributesCount != 2 || got.Attributes[0].Value.GetStringValue() != "héll" {
		t.Errorf("attributes %v, %d dropped: want 3 kept, the first cut to héll, 2 dropped", got.Attributes, got.DroppedAttributesCount)
	}
}

// sinkExporter is a wire exporter of res's spans posting over OTLP/HTTP to
// a bodySink, with no OTEL_* variable in force; it is shut down when the
// test ends.
func sinkExporter(t *testing.T, res *resource.Resource) (*wireExporter, *bodySink) {
	t.Helper()
	clearOTELEnv(t)
	sink := newBodySink(t)
	exp, err := newWireExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(sink.srv.URL+"/v1/traces")),
		res, false, testBatch(t).limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.shutdown(context.Background()) })
	return exp, sink
}

// TestWireValidUTF8: a span whose texts are not UTF-8 (an upstream's error
// message, a tool name) is posted with each bad run replaced by U+FFFD, in
// a request a collector can unmarshal, along with the rest of its batch.
func TestWireValidUTF8(t *testing.T) {
	ctx := context.Background()
	const bad = "a\xff\xfeb"
	exp, sink := sinkExporter(t, resource.NewSchemaless(attribute.String("r"+bad, bad)))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	now := time.Now()
	spans := []*spanState{
		endedSpan("tools/call "+bad, sc, trace.SpanContext{}, trace.SpanKindServer, now, now,
			[]attribute.KeyValue{attribute.String("k"+bad, bad), attribute.StringSlice("ss", []string{bad})}, codes.Error, bad),
		endedSpan("fine", sc, trace.SpanContext{}, trace.SpanKindServer, now, now, nil, codes.Unset, ""),
	}
	if err := exp.export(ctx, spans); err != nil {
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
		s.Name, s.Attributes[0].Key, s.Attributes[0].Value.GetStringValue(),
		s.Attributes[1].Value.GetArrayValue().Values[0].GetStringValue(), s.Status.Message}
	want := []string{"r" + good, good, "tools/call " + good, "k" + good, good, good, good}
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
	exp, sink := sinkExporter(t, resource.Empty())
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	huge := strings.Repeat("n", 8<<20)
	for _, c := range []struct {
		name   string
		target string
		keep   bool
	}{{"huge", huge, false}, {"ordinary", "echo", true}} {
		now := time.Now()
		spans := []*spanState{endedSpan("tools/call "+c.target, sc, trace.SpanContext{}, trace.SpanKindServer, now, now,
			[]attribute.KeyValue{attribute.String("gen_ai.tool.name", c.target)}, codes.Unset, "")}
		if err := exp.export(ctx, spans); err != nil {
			t.Fatal(err)
		}
		if b := sink.take(); len(b) != 1 || len(b[0]) < 2*len(c.target) {
			t.Fatalf("%s: %d requests, want 1 with the span", c.name, len(b))
		}
		kept := cap(exp.buf)
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
	exp, err := newWireExporter(ctx, client, resource.Empty(), false, testBatch(t).limits)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	now := time.Now()
	for _, names := range [][]string{{"tools/call a", "tools/call b"}, {"tools/call c", "tools/call d"}} {
		var spans []*spanState
		for _, n := range names {
			spans = append(spans, endedSpan(n, sc, trace.SpanContext{}, trace.SpanKindServer, now, now, nil, codes.Unset, ""))
		}
		if err := exp.export(ctx, spans); err != nil {
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
