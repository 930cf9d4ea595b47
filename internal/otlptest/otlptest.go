// Package otlptest is a test-only OpenTelemetry collector: it receives
// real OTLP trace exports over HTTP (protobuf or JSON, optionally gzipped,
// POST /v1/traces) or gRPC (TraceService/Export), decodes them with the
// OTLP protobuf definitions, and gives the spans to the test. Tests use it
// to check what the proxy exports exactly as a collector would see it.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request: the SDK sends batches of at most 512
// spans, far below this.
const maxBody = 16 << 20

// Span is one received span, flattened for assertions.
type Span struct {
	// Service is the resource's service.name.
	Service string
	// TraceID, SpanID and ParentSpanID are lower-case hex; ParentSpanID is
	// "" for a root span.
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Kind is "server", "client", "internal", "producer" or "consumer".
	Kind string
	// Attributes holds every attribute as text: strings as they are,
	// numbers and booleans in Go's spelling.
	Attributes map[string]string
	// StatusCode is "unset", "ok" or "error"; StatusMessage its text.
	StatusCode, StatusMessage string
	Start, End                time.Time
}

// Receiver collects the spans of every export it receives. Safe for
// concurrent use.
type Receiver struct {
	endpoint string

	mu      sync.Mutex
	spans   []Span
	exports int
	header  http.Header   // of the last export (gRPC: its metadata)
	changed chan struct{} // closed and replaced on every export
}

func newReceiver() *Receiver { return &Receiver{changed: make(chan struct{})} }

// Endpoint is the URL to export to: http://127.0.0.1:<port>. For HTTP the
// exporter appends /v1/traces; for gRPC the scheme means no TLS.
func (r *Receiver) Endpoint() string { return r.endpoint }

// Exports is how many export requests arrived.
func (r *Receiver) Exports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports
}

// Header returns the headers of the last export (for gRPC, its metadata),
// nil before the first one.
func (r *Receiver) Header() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header.Clone()
}

// Spans returns a copy of the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait returns the spans once done(spans) holds, or fails the test after
// timeout with what arrived.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		spans := append([]Span(nil), r.spans...)
		changed := r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("otlptest: the spans wanted did not arrive within %s; got:\n%s", timeout, Tree(spans))
			return nil
		}
	}
}

func (r *Receiver) add(req *coltrace.ExportTraceServiceRequest, h http.Header) {
	spans := flatten(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.header = h
	r.spans = append(r.spans, spans...)
	r.exports++
	close(r.changed)
	r.changed = make(chan struct{})
}

// NewHTTP starts an OTLP/HTTP receiver on a loopback port, stopped when
// the test ends.
func NewHTTP(t testing.TB) *Receiver {
	t.Helper()
	r := newReceiver()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", r.serveHTTP)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	r.serve(t, srv.Serve, func() { _ = srv.Close() })
	return r
}

// serve runs serve on a loopback listener until the test ends, when stop
// stops it, and sets r's endpoint to the listener's address.
func (r *Receiver) serve(t testing.TB, serve func(net.Listener) error, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = serve(ln)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	r.endpoint = "http://" + ln.Addr().String()
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxBody)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	json := strings.HasPrefix(req.Header.Get("Content-Type"), "application/json")
	if json {
		err = protojson.Unmarshal(data, &msg)
	} else {
		err = proto.Unmarshal(data, &msg)
	}
	if err != nil {
		http.Error(w, "decode: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg, req.Header.Clone())
	var out []byte
	if json {
		out, _ = protojson.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/json")
	} else {
		out, _ = proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	_, _ = w.Write(out)
}

// NewGRPC starts an OTLP/gRPC receiver on a loopback port, stopped when
// the test ends.
func NewGRPC(t testing.TB) *Receiver {
	t.Helper()
	r := newReceiver()
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxBody))
	coltrace.RegisterTraceServiceServer(srv, grpcService{r: r})
	r.serve(t, srv.Serve, srv.Stop)
	return r
}

type grpcService struct {
	coltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	h := http.Header{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	g.r.add(req, h)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func flatten(req *coltrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, Span{
					Service:       service,
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					SpanID:        hex.EncodeToString(s.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
					Name:          s.GetName(),
					Kind:          kindName(s.GetKind()),
					Attributes:    attrs(s.GetAttributes()),
					StatusCode:    statusName(s.GetStatus().GetCode()),
					StatusMessage: s.GetStatus().GetMessage(),
					Start:         time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:           time.Unix(0, int64(s.GetEndTimeUnixNano())),
				})
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = valueText(kv.GetValue())
	}
	return m
}

func valueText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

func kindName(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "unspecified"
}

func statusName(c tracepb.Status_StatusCode) string {
	switch c {
	case tracepb.Status_STATUS_CODE_OK:
		return "ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		return "error"
	}
	return "unset"
}

// Find returns the spans named name.
func Find(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Tree renders spans as an indented tree per trace, children under their
// parent in start order: "<name> [<kind>] <key>=<value> ...", with
// attributes sorted by key. A span whose parent is not among spans (a
// remote parent) is shown as a root with "(parent <id>)".
func Tree(spans []Span) string {
	byParent := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.TraceID+"/"+s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentSpanID != "" && ids[s.TraceID+"/"+s.ParentSpanID] {
			byParent[s.TraceID+"/"+s.ParentSpanID] = append(byParent[s.TraceID+"/"+s.ParentSpanID], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(l []Span) {
		sort.SliceStable(l, func(i, j int) bool { return l[i].Start.Before(l[j].Start) })
	}
	byStart(roots)
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		fmt.Fprintf(&b, "%s [%s] %s", s.Name, s.Kind, s.End.Sub(s.Start).Round(time.Microsecond))
		if depth == 0 {
			fmt.Fprintf(&b, " trace=%s", s.TraceID)
			if s.ParentSpanID != "" {
				fmt.Fprintf(&b, " (parent %s)", s.ParentSpanID)
			}
		}
		keys := make([]string, 0, len(s.Attributes))
		for k := range s.Attributes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, s.Attributes[k])
		}
		if s.StatusCode == "error" {
			fmt.Fprintf(&b, " status=error(%s)", s.StatusMessage)
		}
		b.WriteString("\n")
		kids := byParent[s.TraceID+"/"+s.SpanID]
		byStart(kids)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
