package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/otlptest"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/tracing"
)

// newTestTracer is a real Tracer exporting over OTLP/HTTP to a receiver;
// flush it with Shutdown before reading the receiver.
func newTestTracer(t testing.TB) (*tracing.Tracer, *otlptest.Receiver) {
	t.Helper()
	rcv := otlptest.NewHTTP(t)
	one := 1.0
	tr, err := tracing.New(context.Background(), config.Tracing{Endpoint: rcv.Endpoint(), Protocol: "http/protobuf",
		ServiceName: "mcp-proxy-test", SampleRatio: &one}, tracing.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil || tr == nil {
		t.Fatalf("tracing.New = %v, %v", tr, err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, rcv
}

// parentSpan starts a server span standing in for the downstream request.
func parentSpan(tr *tracing.Tracer) (context.Context, tracing.Span, trace.SpanContext) {
	ctx, s := tr.StartServer(context.Background(), tracing.ServerRequest{Method: "tools/call", Target: "fake__meta"})
	return ctx, s, trace.SpanContextFromContext(ctx)
}

func spanByID(t *testing.T, spans []otlptest.Span, id string) otlptest.Span {
	t.Helper()
	for _, s := range spans {
		if s.Attributes["jsonrpc.request.id"] == id {
			return s
		}
	}
	t.Fatalf("no span for request %s in:\n%s", id, otlptest.Tree(spans))
	return otlptest.Span{}
}

// TestClientSpanStdio: a request over stdio gets a client span, child of
// the span in its ctx, and the server receives that span's context in
// params._meta, next to the members it was sent.
func TestClientSpanStdio(t *testing.T) {
	tr, rcv := newTestTracer(t)
	c := start(t, fakeServer(t, "fake"), Options{Tracer: tr})
	mustConnected(t, c)
	ctx, parent, psc := parentSpan(tr)

	raw, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"meta","arguments":{"a":1},"_meta":{"progressToken":"p1","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Structured struct {
			Meta map[string]json.RawMessage `json:"meta"`
			ID   string                     `json:"id"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	_, err = c.Request(ctx, "tools/call", json.RawMessage(`{"name":"fail"}`))
	if err == nil {
		t.Fatal("fail succeeded")
	}
	parent.End(tracing.OutcomeOK, 0)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()

	call := spanByID(t, spans, got.Structured.ID)
	want := `"00-` + psc.TraceID().String() + `-` + call.SpanID + `-01"`
	if string(got.Structured.Meta["traceparent"]) != want || string(got.Structured.Meta["progressToken"]) != `"p1"` || len(got.Structured.Meta) != 2 {
		t.Errorf("server got _meta %v; want the client span's traceparent %s (replacing the one sent) and progressToken kept", got.Structured.Meta, want)
	}
	if call.Name != "tools/call meta" || call.Kind != "client" || call.ParentSpanID != psc.SpanID().String() || call.TraceID != psc.TraceID().String() {
		t.Errorf("client span %q kind %s parent %s trace %s; want tools/call meta, client, child of %s\n%s",
			call.Name, call.Kind, call.ParentSpanID, call.TraceID, psc.SpanID(), otlptest.Tree(spans))
	}
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "meta", "mcp_proxy.server": "fake",
		"network.transport": "pipe", "mcp.protocol.version": "2025-11-25", "mcp_proxy.outcome": "ok"} {
		if call.Attributes[k] != v {
			t.Errorf("client span %s = %q, want %q", k, call.Attributes[k], v)
		}
	}
	for _, k := range []string{"server.address", "mcp.session.id", "error.type"} {
		if v, ok := call.Attributes[k]; ok {
			t.Errorf("client span has %s = %q", k, v)
		}
	}
	fail := otlptest.Find(spans, "tools/call fail")
	if len(fail) != 1 || fail[0].Attributes["error.type"] != "-32042" || fail[0].Attributes["rpc.response.status_code"] != "-32042" ||
		fail[0].StatusCode != "error" || fail[0].Attributes["mcp_proxy.outcome"] != "error" {
		t.Errorf("failed call's span:\n%s", otlptest.Tree(fail))
	}
	if lists := otlptest.Find(spans, "tools/list"); len(lists) == 0 || lists[0].ParentSpanID != "" {
		t.Errorf("discovery's tools/list has no root client span:\n%s", otlptest.Tree(spans))
	}
}

// TestTracingOffSendsParamsAsGiven: without a Tracer the server receives
// _meta exactly as the caller sent it, a host's traceparent included.
func TestTracingOffSendsParamsAsGiven(t *testing.T) {
	c := start(t, fakeServer(t, "fake"), Options{})
	mustConnected(t, c)
	meta := `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x":[1,2.50,1e400]}`
	raw, err := c.Request(context.Background(), "tools/call", json.RawMessage(`{"name":"meta","_meta":`+meta+`}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"meta":`+meta+`,`) {
		t.Errorf("server got %s; want _meta %s byte for byte", raw, meta)
	}
}

// TestClientSpanHTTP: an HTTP upstream gets the span's context in the
// traceparent header and in params._meta, and the span names the server's
// address and MCP session.
func TestClientSpanHTTP(t *testing.T) {
	tr, rcv := newTestTracer(t)
	headers := &headerLog{name: "Traceparent"}
	var bodies struct {
		sync.Mutex
		all []string
	}
	h := server.NewStreamableHTTPServer(newMCPGoServer())
	ts := httptest.NewServer(headers.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			bodies.Lock()
			bodies.all = append(bodies.all, string(b))
			bodies.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		h.ServeHTTP(w, r)
	})))
	t.Cleanup(ts.Close) // after the Conn's cleanup, which ends its streams
	c := start(t, httpServer("web", ts.URL+"/mcp"), Options{Tracer: tr})
	mustConnected(t, c)
	ctx, parent, psc := parentSpan(tr)
	if _, err := c.Request(ctx, "tools/call", json.RawMessage(`{"name":"hello","arguments":{"who":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	parent.End(tracing.OutcomeOK, 0)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	call := otlptest.Find(spans, "tools/call hello")
	if len(call) != 1 {
		t.Fatalf("spans:\n%s", otlptest.Tree(spans))
	}
	tp := "00-" + psc.TraceID().String() + "-" + call[0].SpanID + "-01"
	hs := headers.all()
	if last := hs[len(hs)-1]; !strings.Contains(strings.Join(hs, "\n"), "POST "+tp) {
		t.Errorf("upstream saw traceparent headers %q (last %q); want POST %s", hs, last, tp)
	}
	bodies.Lock()
	found := false
	for _, b := range bodies.all {
		if strings.Contains(b, `"name":"hello"`) && strings.Contains(b, `"_meta":{"traceparent":"`+tp+`"}`) {
			found = true
		}
	}
	bodies.Unlock()
	if !found {
		t.Errorf("no tools/call body carried _meta.traceparent %s: %q", tp, bodies.all)
	}
	port := ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	for k, v := range map[string]string{"network.transport": "tcp", "server.address": "127.0.0.1", "server.port": port,
		"mcp_proxy.server": "web", "gen_ai.tool.name": "hello"} {
		if call[0].Attributes[k] != v {
			t.Errorf("client span %s = %q, want %q", k, call[0].Attributes[k], v)
		}
	}
	if call[0].Attributes["mcp.session.id"] == "" {
		t.Error("client span has no mcp.session.id for a session-holding HTTP upstream")
	}
	if call[0].ParentSpanID != psc.SpanID().String() {
		t.Errorf("client span's parent %s, want %s", call[0].ParentSpanID, psc.SpanID())
	}
	// Requests without a span in their ctx (initialize, the GET stream,
	// keepalive) carry no traceparent.
	for _, v := range hs {
		if strings.HasPrefix(v, "GET ") && v != "GET " {
			t.Errorf("GET stream carried a traceparent: %q", v)
		}
	}
}

// pipeSession is a session over an in-process stdio "child" that answers
// every request with a fixed small result; it records the request lines.
func pipeSession(tb testing.TB, tr *tracing.Tracer) (*session, func() []string) {
	tb.Helper()
	var mu sync.Mutex
	var lines []string
	inW, outR := answeringChild(tb, func(id json.RawMessage, line string) string {
		mu.Lock()
		if len(lines) < 100 {
			lines = append(lines, strings.TrimSpace(line))
		}
		mu.Unlock()
		return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"hello"}]}}` + "\n"
	})
	cfg := &config.Server{Name: "fx", Transport: "stdio", Command: "fx", Timeout: dur(10 * time.Second), MaxResponseBytes: 1 << 20}
	c := New(cfg, Options{Tracer: tr})
	s := newSession(c, context.Background())
	s.protocol = "2025-11-25"
	st := newStdioTransport(newLineReader(outR, 1<<20), inW, zerolog.Nop())
	st.start(context.Background())
	s.tr = st
	tb.Cleanup(func() {
		s.die(ErrConnectionLost)
		_ = st.Close()
	})
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}

// TestRequestLineTracing: the bytes on the child's stdin. Off: params
// exactly as given. On: the same bytes with _meta.traceparent appended.
// (The stdio transport drops insignificant white space, so the params
// here have none.)
func TestRequestLineTracing(t *testing.T) {
	params := `{"name":"echo","arguments":{"n":1e400,"s":"\u00e9"}}`
	off, linesOff := pipeSession(t, nil)
	if _, err := off.request(context.Background(), "tools/call", json.RawMessage(params)); err != nil {
		t.Fatal(err)
	}
	if got := linesOff(); len(got) != 1 || !strings.Contains(got[0], `"params":`+params+`}`) {
		t.Errorf("tracing off: child got %q, want params %s byte for byte", got, params)
	}
	tr, _ := newTestTracer(t)
	on, linesOn := pipeSession(t, tr)
	ctx, parent, psc := parentSpan(tr)
	defer parent.End(tracing.OutcomeOK, 0)
	if _, err := on.request(ctx, "tools/call", json.RawMessage(params)); err != nil {
		t.Fatal(err)
	}
	got := linesOn()
	prefix := `"params":{"name":"echo","arguments":{"n":1e400,"s":"\u00e9"},"_meta":{"traceparent":"00-` + psc.TraceID().String() + `-`
	if len(got) != 1 || !strings.Contains(got[0], prefix) {
		t.Errorf("tracing on: child got %q, want %s...", got, prefix)
	}
}

// TestRequestOffAllocations: tracing off adds no allocation to a request;
// the same request with a Tracer allocates more (so the count can tell).
// AllocsPerRun counts the whole process, the child's goroutine and the
// transport's reader included, whose counts wobble by one under load and
// the race detector: each figure is the least of a few alternating runs.
func TestRequestOffAllocations(t *testing.T) {
	params := json.RawMessage(`{"name":"echo","arguments":{}}`)
	tr, _ := newTestTracer(t)
	offS, _ := pipeSession(t, nil)
	onS, _ := pipeSession(t, tr)
	baseS, _ := pipeSession(t, nil)
	ctx := context.Background()
	request := func(s *session) func() {
		return func() {
			if _, err := s.request(ctx, "tools/call", params); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The request path without tracing: request minus startSpan/endSpan. (isObject counts: under the race
	// detector its pooled scanner is often dropped and allocated again.)
	base := func() {
		id := "px-" + strconv.FormatUint(baseS.c.ids.Add(1), 10) // as request makes it
		if !isObject(params) {
			t.Fatal("params")
		}
		if baseS.c.refusedTool(params) { // as request checks a tools/call
			t.Fatal("refused")
		}
		if _, err := baseS.send(ctx, "tools/call", id, params); err != nil {
			t.Fatal(err)
		}
	}
	least := func(fn func(), prev float64) float64 { return min(prev, testing.AllocsPerRun(200, fn)) }
	off, on, without := math.Inf(1), math.Inf(1), math.Inf(1)
	for range 3 {
		off = least(request(offS), off)
		without = least(base, without)
		on = least(request(onS), on)
	}
	t.Logf("allocations per request: tracing off %.0f, on %.0f, without the hooks %.0f", off, on, without)
	if on <= off {
		t.Errorf("tracing on allocates %.0f, off %.0f: the measure cannot see tracing", on, off)
	}
	slack := 0.0
	if raceEnabled {
		slack = 1 // sync.Pool drops items at random under the race detector
	}
	if off > without+slack {
		t.Errorf("tracing off: %.0f allocations per request, %.0f without the tracing hooks", off, without)
	}
}

// BenchmarkRequestTracing measures one upstream request over stdio (an
// in-process child on real pipes) with tracing off and on (sample ratio
// 1.0, exporting over OTLP/HTTP to a collector that discards what it
// gets, so that decoding does not count), each under a parent server span
// like a proxied call: the "on" figure is both spans, their export and the
// trace context written into the request.
func BenchmarkRequestTracing(b *testing.B) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`)
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			var tr *tracing.Tracer
			if mode == "on" {
				tr = discardingTracer(b)
			}
			s, _ := pipeSession(b, tr)
			ctx := context.Background()
			id := json.RawMessage(`7`)
			b.ReportAllocs()
			for b.Loop() {
				sctx, span := tr.StartServer(ctx, tracing.ServerRequest{Method: "tools/call", Target: "fx__echo", ID: id, Agent: "default"})
				if _, err := s.request(sctx, "tools/call", params); err != nil {
					b.Fatal(err)
				}
				span.End(tracing.OutcomeOK, 0)
			}
		})
	}
}

// discardingTracer is a Tracer exporting over OTLP/HTTP (ratio 1.0) to a
// loopback collector that reads each export and answers 200 without
// decoding it.
func discardingTracer(b *testing.B) *tracing.Tracer {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(ts.Close)
	one := 1.0
	tr, err := tracing.New(context.Background(), config.Tracing{Endpoint: ts.URL, Protocol: "http/protobuf", SampleRatio: &one},
		tracing.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// TestOutcomeOf: the client span's outcome of each kind of call, and a
// call that succeeded (the usual case) classified without an allocation.
func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		result       string
		err          error
		outcome      string
		code         int
	}{
		{"ok", "tools/call", `{"content":[]}`, nil, tracing.OutcomeOK, 0},
		{"tool error", "tools/call", `{"content":[],"isError":true}`, nil, metrics.OutcomeToolError, 0},
		{"isError of another method", "prompts/get", `{"isError":true}`, nil, tracing.OutcomeOK, 0},
		{"JSON-RPC error", "tools/call", ``, fmt.Errorf("call: %w", &RPCError{Code: -32602, Message: "bad"}), metrics.OutcomeError, -32602},
		{"connection lost", "tools/call", ``, ErrConnectionLost, metrics.OutcomeError, 0},
		{"timeout", "tools/call", ``, context.DeadlineExceeded, metrics.OutcomeTimeout, 0},
		{"canceled", "tools/call", ``, context.Canceled, metrics.OutcomeCanceled, 0},
		{"other", "tools/call", ``, errors.New("boom"), metrics.OutcomeError, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcome, code := outcomeOf(tc.method, json.RawMessage(tc.result), tc.err)
			if outcome != tc.outcome || code != tc.code {
				t.Errorf("outcomeOf = %s, %d; want %s, %d", outcome, code, tc.outcome, tc.code)
			}
		})
	}
	result := json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)
	if n := testing.AllocsPerRun(100, func() { outcomeOf("tools/call", result, nil) }); n != 0 {
		t.Errorf("a call that succeeded: %.0f allocations, want 0", n)
	}
}
