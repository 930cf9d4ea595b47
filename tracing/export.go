package tracing

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// wireExporter is the OTLP exporter of the protobuf protocols (http/protobuf
// and grpc): the SDK's client (its endpoint, headers, TLS, compression,
// timeout and retries, from the options and the OTEL_EXPORTER_OTLP_*
// variables) posting spans this package encodes itself.
//
// The SDK's own exporter first converts every span into protobuf message
// objects, three for each attribute, which the client then marshals. Here
// each span is encoded once into one buffer of the batch (wire.go) and
// handed to the client as a Span message holding nothing but those bytes
// as its unknown fields, which proto.Marshal writes out as they are: the
// request the collector receives is byte for byte the SDK exporter's
// (TestWireMatchesSDK), and the client still sees the batch's resources,
// scopes and span count. http/json keeps the SDK's exporter: the JSON
// encoding does not carry unknown fields.
type wireExporter struct {
	client otlptrace.Client

	// mu holds buf and msgs, the encoding buffer and the span messages
	// that batches reuse: the client is done with a batch's bytes and
	// messages when UploadTraces returns (it marshals the request before
	// sending it, retries included).
	mu   sync.Mutex
	buf  []byte         // kept only up to maxKeptBuf
	msgs []tracepb.Span // kept only up to maxKeptMsgs

	stopOnce sync.Once
	stopErr  error
}

var _ sdktrace.SpanExporter = (*wireExporter)(nil)

// newWireExporter starts client and returns the exporter that posts
// through it.
func newWireExporter(ctx context.Context, client otlptrace.Client) (*wireExporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return &wireExporter{client: client}, nil
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *wireExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cap(e.msgs) < len(spans) {
		e.msgs = make([]tracepb.Span, len(spans))
	}
	msgs := e.msgs[:len(spans)]
	req, buf := encodeSpans(e.buf[:0], msgs, spans)
	e.buf = buf
	if cap(buf) > maxKeptBuf {
		// A batch of huge values (a client's tool name can be as long as
		// its request) is not kept for the life of the process.
		e.buf = nil
	}
	var err error
	if len(req) > 0 {
		err = e.client.UploadTraces(ctx, req)
	}
	clear(msgs) // no bytes of this batch stay reachable
	if cap(e.msgs) > maxKeptMsgs {
		e.msgs = nil
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

// Shutdown implements sdktrace.SpanExporter: it stops the client once.
func (e *wireExporter) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() { e.stopErr = e.client.Stop(ctx) })
	return e.stopErr
}

// encodeSpans groups spans by resource and instrumentation scope, in the
// order they first appear, as OTLP's ResourceSpans and ScopeSpans, each
// span, resource and scope a message holding its encoding as unknown
// fields. nil spans are skipped. msgs, zero messages as many as spans,
// become the spans' messages. The spans' bytes are appended to buf, which
// is returned for reuse once the messages are no longer needed.
func encodeSpans(buf []byte, msgs []tracepb.Span, spans []sdktrace.ReadOnlySpan) ([]*tracepb.ResourceSpans, []byte) {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var (
		out    []*tracepb.ResourceSpans
		resIdx = map[attribute.Distinct]*tracepb.ResourceSpans{}
		scopes = map[scopeKey]*tracepb.ScopeSpans{}
		ends   = make([]int, len(spans))
	)
	for i, s := range spans {
		if s == nil {
			continue
		}
		buf = appendSpan(buf, s)
		ends[i] = len(buf)

		res := s.Resource()
		k := scopeKey{res: res.Equivalent(), scope: s.InstrumentationScope()}
		ss, ok := scopes[k]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: scopeMessage(k.scope), SchemaUrl: k.scope.SchemaURL}
			scopes[k] = ss
			rs := resIdx[k.res]
			if rs == nil {
				rs = &tracepb.ResourceSpans{Resource: resourceMessage(res.Iter(), res != nil), SchemaUrl: res.SchemaURL()}
				resIdx[k.res] = rs
				out = append(out, rs)
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, &msgs[i])
	}
	// buf no longer grows: each span's bytes can be sliced out of it.
	start := 0
	for i, s := range spans {
		if s == nil {
			continue
		}
		msgs[i].ProtoReflect().SetUnknown(buf[start:ends[i]:ends[i]])
		start = ends[i]
	}
	return out, buf
}

// resourceMessage is a Resource of the attributes of it; nil when there is
// no resource.
func resourceMessage(it attribute.Iterator, present bool) *resourcepb.Resource {
	if !present {
		return nil
	}
	m := &resourcepb.Resource{}
	if b := appendIterKeyValues(nil, fResourceAttributes, it); len(b) > 0 {
		m.ProtoReflect().SetUnknown(b)
	}
	return m
}

// scopeMessage is the InstrumentationScope of sc; nil for the zero scope.
func scopeMessage(sc instrumentation.Scope) *commonpb.InstrumentationScope {
	if sc == (instrumentation.Scope{}) {
		return nil
	}
	b := appendStringField(nil, fScopeName, sc.Name)
	b = appendStringField(b, fScopeVersion, sc.Version)
	b = appendIterKeyValues(b, fScopeAttributes, sc.Attributes.Iter())
	m := &commonpb.InstrumentationScope{}
	if len(b) > 0 {
		m.ProtoReflect().SetUnknown(b)
	}
	return m
}
