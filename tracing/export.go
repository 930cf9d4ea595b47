package tracing

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// wireExporter is the OTLP exporter of every protocol: the SDK's client
// (its endpoint, headers, TLS, compression, timeout and retries, from the
// options and the OTEL_EXPORTER_OTLP_* variables) posting spans this
// package encodes itself.
//
// Each span is encoded once into one buffer of the batch (wire.go) and,
// over http/protobuf and grpc, handed to the client as a Span message
// holding nothing but those bytes as its unknown fields, which
// proto.Marshal writes out as they are: the request the collector receives
// is byte for byte what the SDK's own exporter would send for the same
// span (TestWireMatchesSDK). JSON does not carry unknown fields, so over
// http/json each span's bytes are decoded into its message first.
type wireExporter struct {
	client otlptrace.Client
	json   bool

	// The batch's request, one resource of one scope, kept for the next:
	// the client is done with a batch's bytes and messages when
	// UploadTraces returns (it marshals the request before sending it,
	// retries included). Only the batcher's goroutine exports.
	req   []*tracepb.ResourceSpans
	scope *tracepb.ScopeSpans
	buf   []byte         // kept only up to maxKeptBuf
	msgs  []tracepb.Span // kept only up to maxKeptMsgs
	ptrs  []*tracepb.Span
	limit attrLimits

	stopOnce sync.Once
	stopErr  error
}

var _ spanExporter = (*wireExporter)(nil)

// newWireExporter starts client and returns the exporter that posts
// through it the spans of res, as the proxy's instrumentation scope.
func newWireExporter(ctx context.Context, client otlptrace.Client, res *resource.Resource, json bool, limit attrLimits) (*wireExporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	e := &wireExporter{client: client, json: json, limit: limit}
	rm := &resourcepb.Resource{}
	if err := e.fill(rm, appendIterKeyValues(nil, fResourceAttributes, res.Iter())); err != nil {
		return nil, err
	}
	sm := &commonpb.InstrumentationScope{}
	if err := e.fill(sm, appendStringField(nil, fScopeName, instrumentationName)); err != nil {
		return nil, err
	}
	e.scope = &tracepb.ScopeSpans{Scope: sm, SchemaUrl: semconv.SchemaURL}
	e.req = []*tracepb.ResourceSpans{{Resource: rm, ScopeSpans: []*tracepb.ScopeSpans{e.scope}, SchemaUrl: res.SchemaURL()}}
	return e, nil
}

// fill makes m the message encoded as b: its unknown fields, or decoded
// for JSON.
func (e *wireExporter) fill(m proto.Message, b []byte) error {
	if e.json {
		return proto.Unmarshal(b, m)
	}
	if len(b) > 0 {
		m.ProtoReflect().SetUnknown(b)
	}
	return nil
}

// export implements spanExporter.
func (e *wireExporter) export(ctx context.Context, spans []*spanState) error {
	if len(spans) == 0 {
		return nil
	}
	if cap(e.msgs) < len(spans) {
		e.msgs = make([]tracepb.Span, len(spans))
		e.ptrs = make([]*tracepb.Span, len(spans))
	}
	msgs, ptrs := e.msgs[:len(spans)], e.ptrs[:len(spans)]
	buf := e.buf[:0]
	ends := make([]int, len(spans))
	for i, st := range spans {
		buf = appendSpan(buf, st, e.limit)
		ends[i] = len(buf)
	}
	// buf no longer grows: each span's bytes can be sliced out of it.
	var err error
	start := 0
	for i, end := range ends {
		ptrs[i] = &msgs[i]
		if err = e.fill(&msgs[i], buf[start:end:end]); err != nil {
			break
		}
		start = end
	}
	if err == nil {
		e.scope.Spans = ptrs
		err = e.client.UploadTraces(ctx, e.req)
		e.scope.Spans = nil
	}
	e.buf = buf
	if cap(buf) > maxKeptBuf {
		// A batch of huge values (a client's tool name can be as long as
		// its request) is not kept for the life of the process.
		e.buf = nil
	}
	clear(msgs) // no bytes of this batch stay reachable
	clear(ptrs)
	if cap(e.msgs) > maxKeptMsgs {
		e.msgs, e.ptrs = nil, nil
	}
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// maxKeptBuf bounds the encoding buffer kept between batches: a full batch
// of the proxy's spans (512, well under 1 KB each) fits several times.
const maxKeptBuf = 4 << 20

// maxKeptMsgs bounds the span messages kept between batches: the batch
// processor's default batch (512 spans) fits, a larger configured one
// (OTEL_BSP_MAX_EXPORT_BATCH_SIZE) allocates its own each time.
const maxKeptMsgs = 2048

// shutdown implements spanExporter: it stops the client once.
func (e *wireExporter) shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() { e.stopErr = e.client.Stop(ctx) })
	return e.stopErr
}
