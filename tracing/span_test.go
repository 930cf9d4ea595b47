package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// memExporter keeps the spans exported to it.
type memExporter struct {
	mu    sync.Mutex
	spans []*spanState
}

func (m *memExporter) export(_ context.Context, spans []*spanState) error {
	m.mu.Lock()
	m.spans = append(m.spans, spans...)
	m.mu.Unlock()
	return nil
}

func (m *memExporter) shutdown(context.Context) error { return nil }

// testBatch is the batch processor's default config.
func testBatch(t testing.TB) batchConfig {
	t.Helper()
	bc, err := batchConfigFrom(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return bc
}

// memTracer is a Tracer that keeps its spans in memory, sampling with
// sampler (nil: the default, ParentBased(AlwaysSample)); ended reads them.
func memTracer(t *testing.T, sampler ...sdktrace.Sampler) (*Tracer, *memExporter) {
	t.Helper()
	s := sdktrace.ParentBased(sdktrace.AlwaysSample())
	if len(sampler) > 0 {
		s = sampler[0]
	}
	exp := &memExporter{}
	tr := newTracer(exp, s, testBatch(t), zerolog.Nop(), func(err error) { t.Errorf("export: %v", err) })
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

// ended shuts tr down, which exports every ended span, and returns them
// as the SDK's test stubs.
func ended(t *testing.T, tr *Tracer, exp *memExporter) tracetest.SpanStubs {
	t.Helper()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	out := make(tracetest.SpanStubs, 0, len(exp.spans))
	for _, st := range exp.spans {
		out = append(out, stub(st))
	}
	return out
}

// stub is the SDK's test stub of the ended span st.
func stub(st *spanState) tracetest.SpanStub {
	var attrs []attribute.KeyValue
	st.attributes(func(kv attribute.KeyValue) { attrs = append(attrs, kv) })
	return tracetest.SpanStub{
		Name: st.name, SpanContext: st.sc, Parent: st.parent, SpanKind: st.kind,
		StartTime: st.start, EndTime: st.end, Attributes: attrs,
		Status:            sdktrace.Status{Code: st.status, Description: st.statusText},
		DroppedAttributes: st.dropped,
	}
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func sameMap(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected attribute %s = %q", what, k, got[k])
		}
	}
}

const (
	hostTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	hostSpan   = "00f067aa0ba902b7"
	hostParent = "00-" + hostTrace + "-" + hostSpan + "-01"
	metaTrace  = "0af7651916cd43dd8448eb211c80319c"
	metaSpan   = "b7ad6b7169203331"
	metaParent = "00-" + metaTrace + "-" + metaSpan + "-01"
)

func TestServerAndClientSpans(t *testing.T) {
	tr, exp := memTracer(t)
	ctx, srv := tr.StartServer(context.Background(), ServerRequest{
		Method: "tools/call", Target: "github__create_issue", ID: json.RawMessage(`"req-7"`),
		Params:    json.RawMessage(`{"name":"github__create_issue","arguments":{"token":"secret-arg"}}`),
		SessionID: "sess-1", Protocol: "2025-11-25", Agent: "assistant",
		Transport: TransportTCP, Address: "127.0.0.1", Port: 8080,
	})
	srv.SetServer("github")
	srv.SetApproval("approve")
	cctx, cli := tr.StartClient(ctx, ClientRequest{
		Method: "tools/call", Params: json.RawMessage(`{"name":"create_issue","arguments":{"title":"x"}}`),
		ID: "px-3", Server: "github", Protocol: "2025-06-18", SessionID: "up-9",
		Transport: TransportTCP, Address: "api.example.com", Port: 443,
	})
	if tr.TraceID(cctx) != tr.TraceID(ctx) || tr.TraceID(ctx) == "" {
		t.Errorf("trace ids: client %q, server %q", tr.TraceID(cctx), tr.TraceID(ctx))
	}
	cli.End("tool_error", 0)
	srv.End(OutcomeOK, 0)

	spans := ended(t, tr, exp)
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	c, s := spans[0], spans[1]
	if s.Name != "tools/call github__create_issue" || s.SpanKind != trace.SpanKindServer {
		t.Errorf("server span %q kind %v", s.Name, s.SpanKind)
	}
	if c.Name != "tools/call create_issue" || c.SpanKind != trace.SpanKindClient {
		t.Errorf("client span %q kind %v", c.Name, c.SpanKind)
	}
	if c.Parent.SpanID() != s.SpanContext.SpanID() || c.SpanContext.TraceID() != s.SpanContext.TraceID() {
		t.Errorf("client span's parent %s, want the server span %s", c.Parent.SpanID(), s.SpanContext.SpanID())
	}
	if s.Parent.IsValid() {
		t.Errorf("server span without incoming context has parent %s", s.Parent.SpanID())
	}
	sameMap(t, "server span", attrMap(s.Attributes), map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "github__create_issue", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "req-7", "mcp.session.id": "sess-1", "mcp.protocol.version": "2025-11-25",
		"network.transport": "tcp", "server.address": "127.0.0.1", "server.port": "8080",
		"mcp_proxy.agent": "assistant", "mcp_proxy.server": "github", "mcp_proxy.approval": "approve",
		"mcp_proxy.outcome": "ok",
	})
	sameMap(t, "client span", attrMap(c.Attributes), map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "create_issue", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "px-3", "mcp.session.id": "up-9", "mcp.protocol.version": "2025-06-18",
		"network.transport": "tcp", "server.address": "api.example.com", "server.port": "443",
		"mcp_proxy.server": "github", "mcp_proxy.outcome": "tool_error", "error.type": "tool_error",
	})
	if c.Status.Code.String() != "Error" || c.Status.Description != "tool_error" {
		t.Errorf("client status %v %q", c.Status.Code, c.Status.Description)
	}
	if s.Status.Code.String() != "Unset" {
		t.Errorf("server status %v, want Unset for ok", s.Status.Code)
	}
}

func TestSpanNamesAndOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		req      ServerRequest
		policy   string
		outcome  string
		code     int
		wantName string
		want     map[string]string
		status   string
	}{
		{
			name:     "denied call",
			req:      ServerRequest{Method: "tools/call", Target: "fs__write", ID: json.RawMessage(`12`), Agent: "a", Transport: TransportPipe},
			policy:   "excluded_tools",
			outcome:  "denied",
			wantName: "tools/call fs__write",
			want: map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "fs__write", "gen_ai.operation.name": "execute_tool",
				"jsonrpc.request.id": "12", "network.transport": "pipe", "mcp_proxy.agent": "a", "mcp_proxy.policy.rule": "excluded_tools",
				"mcp_proxy.outcome": "denied", "error.type": "denied"},
			status: "Error",
		},
		{
			name:     "resource read names no URI",
			req:      ServerRequest{Method: "resources/read", Params: json.RawMessage(`{"uri":"file:///secret?token=x"}`)},
			outcome:  "error",
			code:     -32002,
			wantName: "resources/read",
			want: map[string]string{"mcp.method.name": "resources/read", "mcp_proxy.outcome": "error",
				"error.type": "-32002", "rpc.response.status_code": "-32002"},
			status: "Error",
		},
		{
			name:     "prompt",
			req:      ServerRequest{Method: "prompts/get", Target: "review", ID: json.RawMessage(`null`)},
			outcome:  "ok",
			wantName: "prompts/get review",
			want:     map[string]string{"mcp.method.name": "prompts/get", "gen_ai.prompt.name": "review", "mcp_proxy.outcome": "ok"},
			status:   "Unset",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, exp := memTracer(t)
			_, s := tr.StartServer(context.Background(), tt.req)
			s.SetPolicyRule(tt.policy)
			s.End(tt.outcome, tt.code)
			spans := ended(t, tr, exp)
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			if spans[0].Name != tt.wantName {
				t.Errorf("name %q, want %q", spans[0].Name, tt.wantName)
			}
			sameMap(t, tt.name, attrMap(spans[0].Attributes), tt.want)
			if got := spans[0].Status.Code.String(); got != tt.status {
				t.Errorf("status %s, want %s", got, tt.status)
			}
		})
	}
}

func TestServerSpanParent(t *testing.T) {
	tests := []struct {
		name      string
		header    http.Header
		params    string
		wantTrace string
		wantSpan  string
		wantState string
	}{
		{name: "none", params: `{}`},
		{name: "header", header: http.Header{"Traceparent": {hostParent}, "Tracestate": {"vendor=1"}},
			params: `{"name":"x"}`, wantTrace: hostTrace, wantSpan: hostSpan, wantState: "vendor=1"},
		{name: "meta", params: `{"name":"x","_meta":{"progressToken":1,"traceparent":"` + metaParent + `","tracestate":"m=2"}}`,
			wantTrace: metaTrace, wantSpan: metaSpan, wantState: "m=2"},
		{name: "meta wins over header", header: http.Header{"Traceparent": {hostParent}},
			params: `{"_meta":{"traceparent":"` + metaParent + `"}}`, wantTrace: metaTrace, wantSpan: metaSpan},
		{name: "malformed meta leaves the header's", header: http.Header{"Traceparent": {hostParent}},
			params: `{"_meta":{"traceparent":"00-zz-yy-01"}}`, wantTrace: hostTrace, wantSpan: hostSpan},
		{name: "meta key with escapes", params: `{"name":"x","_m\u0065ta":{"\u0074raceparent":"` + metaParent + `"}}`,
			wantTrace: metaTrace, wantSpan: metaSpan},
		{name: "meta not a string", params: `{"_meta":{"traceparent":42}}`},
		{name: "meta not an object", params: `{"_meta":"00-` + metaTrace + `-` + metaSpan + `-01"}`},
		{name: "invalid params", params: `{"_meta":{"traceparent":"` + metaParent + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, exp := memTracer(t)
			_, s := tr.StartServer(context.Background(), ServerRequest{Method: "tools/call", Header: tt.header, Params: json.RawMessage(tt.params)})
			s.End(OutcomeOK, 0)
			spans := ended(t, tr, exp)
			p := spans[0].Parent
			if tt.wantTrace == "" {
				if p.IsValid() {
					t.Errorf("parent %s, want none", p.SpanID())
				}
				return
			}
			if p.TraceID().String() != tt.wantTrace || p.SpanID().String() != tt.wantSpan || !p.IsRemote() {
				t.Errorf("parent %s/%s remote=%t, want %s/%s", p.TraceID(), p.SpanID(), p.IsRemote(), tt.wantTrace, tt.wantSpan)
			}
			if got := spans[0].SpanContext.TraceID().String(); got != tt.wantTrace {
				t.Errorf("trace %s, want the incoming %s continued", got, tt.wantTrace)
			}
			if got := spans[0].SpanContext.TraceState().String(); got != tt.wantState {
				t.Errorf("tracestate %q, want %q", got, tt.wantState)
			}
		})
	}
}

func TestSampleRatioZeroStillPropagates(t *testing.T) {
	tr, exp := memTracer(t, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)))
	ctx, s := tr.StartClient(context.Background(), ClientRequest{Method: "tools/list", ID: "px-1"})
	out := string(tr.InjectMeta(ctx, nil))
	if s.IsRecording() {
		t.Error("an unsampled span records")
	}
	s.End(OutcomeOK, 0)
	if len(ended(t, tr, exp)) != 0 {
		t.Error("an unsampled span was exported")
	}
	sc := trace.SpanContextFromContext(ctx)
	want := `{"_meta":{"traceparent":"00-` + sc.TraceID().String() + `-` + sc.SpanID().String() + `-00"}}`
	if out != want {
		t.Errorf("InjectMeta = %s, want %s (the not-sampled decision travels on)", out, want)
	}
}

// TestOutcomeSetDeeper: a step inside the request sets the outcome on the
// server span from its ctx (even from inside a client span's ctx); the
// starter's End outcome is only the fallback.
func TestOutcomeSetDeeper(t *testing.T) {
	tr, exp := memTracer(t)
	ctx, s := tr.StartServer(context.Background(), ServerRequest{Method: "tools/call", Target: "fs__write"})
	cctx, c := tr.StartClient(ctx, ClientRequest{Method: "tools/call"})
	inner := tr.SpanFromContext(cctx)
	inner.SetServer("fs")
	inner.SetPolicyRule("read_only")
	inner.SetOutcome("denied", 0)
	c.End(OutcomeOK, 0)
	s.End(OutcomeOK, 0) // the route's fallback: the chain's outcome stays
	_, plain := tr.StartServer(context.Background(), ServerRequest{Method: "ping"})
	plain.End("error", -32603)
	spans := ended(t, tr, exp)
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	sameMap(t, "server span", attrMap(spans[1].Attributes), map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "fs__write", "gen_ai.operation.name": "execute_tool",
		"mcp_proxy.server": "fs", "mcp_proxy.policy.rule": "read_only", "mcp_proxy.outcome": "denied", "error.type": "denied",
	})
	if spans[1].Status.Code.String() != "Error" {
		t.Errorf("status %v", spans[1].Status.Code)
	}
	sameMap(t, "client span", attrMap(spans[0].Attributes), map[string]string{"mcp.method.name": "tools/call", "mcp_proxy.outcome": "ok"})
	sameMap(t, "ping span", attrMap(spans[2].Attributes), map[string]string{"mcp.method.name": "ping", "mcp_proxy.outcome": "error",
		"error.type": "-32603", "rpc.response.status_code": "-32603"})
	if got := (*Tracer)(nil).SpanFromContext(ctx); got.IsRecording() {
		t.Error("a nil Tracer's SpanFromContext records")
	}
	if got := tr.SpanFromContext(context.Background()); got.IsRecording() {
		t.Error("SpanFromContext without a server span records")
	}
}

// TestEveryAttributeKept: a server span with every attribute the proxy
// records (each start field, then server, policy rule, approval and a
// failed outcome with a JSON-RPC code) keeps them all; so does a client
// span. A key set again (the approval) is replaced.
func TestEveryAttributeKept(t *testing.T) {
	tr, exp := memTracer(t)
	ctx, srv := tr.StartServer(context.Background(), ServerRequest{Method: "tools/call", Target: "gh__create",
		ID: json.RawMessage(`"a\u0062"`), SessionID: "s1", Protocol: "2025-11-25", Agent: "bot",
		Transport: TransportTCP, Address: "127.0.0.1", Port: 8080})
	srv.SetServer("gh")
	srv.SetPolicyRule("read_only")
	srv.SetApproval("approve")
	srv.SetOutcome("denied", -32001)
	srv.SetApproval("deny")
	_, cli := tr.StartClient(ctx, ClientRequest{Method: "tools/call", Params: json.RawMessage(`{"name":"cre\u0061te"}`),
		ID: "px-3", Server: "gh", Protocol: "2025-11-25", SessionID: "u1", Transport: TransportTCP, Address: "10.0.0.2", Port: 9000})
	cli.End("timeout", 0)
	srv.End("error", -32603) // after SetOutcome: ignored
	spans := ended(t, tr, exp)
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	sameMap(t, "client span", attrMap(spans[0].Attributes), map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "create", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "px-3", "mcp.session.id": "u1", "mcp.protocol.version": "2025-11-25",
		"network.transport": "tcp", "server.address": "10.0.0.2", "server.port": "9000", "mcp_proxy.server": "gh",
		"mcp_proxy.outcome": "timeout", "error.type": "timeout",
	})
	want := map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "gh__create", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "ab", "mcp.session.id": "s1", "mcp.protocol.version": "2025-11-25",
		"network.transport": "tcp", "server.address": "127.0.0.1", "server.port": "8080", "mcp_proxy.agent": "bot",
		"mcp_proxy.server": "gh", "mcp_proxy.policy.rule": "read_only", "mcp_proxy.approval": "deny",
		"mcp_proxy.outcome": "denied", "error.type": "-32001", "rpc.response.status_code": "-32001",
	}
	if len(want) != int(numAttrKeys)-1 {
		t.Fatalf("the fullest server span has %d attributes, want every one of the proxy's but gen_ai.prompt.name", len(want))
	}
	sameMap(t, "server span", attrMap(spans[1].Attributes), want)
	if got := len(spans[1].Attributes); got != len(want) {
		t.Errorf("server span has %d attributes, want %d", got, len(want))
	}
}

// TestRecordingEndsWithSpan: a sampled span records until it ends, and
// what is set on it afterwards does not reach the exported span.
func TestRecordingEndsWithSpan(t *testing.T) {
	tr, exp := memTracer(t)
	ctx, s := tr.StartServer(context.Background(), ServerRequest{Method: "tools/list"})
	inner := tr.SpanFromContext(ctx)
	if !s.IsRecording() || !inner.IsRecording() {
		t.Fatal("a sampled span does not record")
	}
	s.End(OutcomeOK, 0)
	if s.IsRecording() || inner.IsRecording() {
		t.Error("an ended span still records")
	}
	inner.SetServer("late")
	inner.SetOutcome("denied", 0)
	spans := ended(t, tr, exp)
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	for _, kv := range spans[0].Attributes {
		if kv.Key == AttrServer || kv.Key == AttrOutcome && kv.Value.AsString() != OutcomeOK {
			t.Errorf("attribute %s=%s set after End was exported", kv.Key, kv.Value.Emit())
		}
	}
	if spans[0].Status.Code == codes.Error {
		t.Error("a SetOutcome after End marked the exported span failed")
	}
}
