package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/otlptest"
)

// A host's trace context, as a host would send it.
const (
	hostTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	hostSpan        = "00f067aa0ba902b7"
	hostTraceparent = "00-" + hostTrace + "-" + hostSpan + "-01"
)

// traceRecord is one "trace" line of a fixture's record file: the trace
// context one request arrived with.
type traceRecord struct {
	Method            string          `json:"method"`
	ID                json.RawMessage `json:"id"`
	MetaTraceparent   *string         `json:"meta_traceparent"`
	MetaTracestate    *string         `json:"meta_tracestate"`
	HeaderTraceparent *string         `json:"header_traceparent"`
	HeaderTracestate  *string         `json:"header_tracestate"`
}

// traceRecords returns the trace lines of a record file for method.
func traceRecords(t testing.TB, record, method string) []traceRecord {
	t.Helper()
	var out []traceRecord
	for _, line := range recorded(t, record) {
		var l struct {
			Trace *traceRecord `json:"trace"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Trace == nil || l.Trace.Method != method {
			continue
		}
		out = append(out, *l.Trace)
	}
	return out
}

// callTrace is what one proxied tools/call left in the collector and at
// the upstream.
type callTrace struct {
	// Client is the proxy's client span of the upstream request.
	Client otlptest.Span
	// Upstream is the trace context the upstream received with it.
	Upstream traceRecord
}

// callTraceOf finds the client span named span (`tools/call <upstream
// tool>`) of server whose request id the fixture recorded, and checks the
// link every traced upstream request must have: the fixture received the
// client span's own context in params._meta.traceparent and, over HTTP,
// in the traceparent header.
func callTraceOf(t testing.TB, spans []otlptest.Span, record, server, span string, httpUpstream bool) callTrace {
	t.Helper()
	for _, rec := range traceRecords(t, record, "tools/call") {
		var id string
		if json.Unmarshal(rec.ID, &id) != nil {
			continue
		}
		for _, s := range otlptest.Find(spans, span) {
			if s.Attributes["jsonrpc.request.id"] != id || s.Attributes["mcp_proxy.server"] != server {
				continue
			}
			want := "00-" + s.TraceID + "-" + s.SpanID + "-01"
			if rec.MetaTraceparent == nil || *rec.MetaTraceparent != want {
				t.Errorf("%s: upstream got _meta.traceparent %v, want the client span's %s", span, deref(rec.MetaTraceparent), want)
			}
			if httpUpstream && (rec.HeaderTraceparent == nil || *rec.HeaderTraceparent != want) {
				t.Errorf("%s: upstream got the traceparent header %v, want %s", span, deref(rec.HeaderTraceparent), want)
			}
			if !httpUpstream && rec.HeaderTraceparent != nil {
				t.Errorf("%s: a stdio upstream has a traceparent header %q", span, *rec.HeaderTraceparent)
			}
			return callTrace{Client: s, Upstream: rec}
		}
	}
	t.Fatalf("no client span %q of server %s matches a tools/call the upstream recorded; spans:\n%s\nrecord:\n%s",
		span, server, otlptest.Tree(spans), strings.Join(recorded(t, record), "\n"))
	return callTrace{}
}

func deref(s *string) string {
	if s == nil {
		return "(absent)"
	}
	return *s
}

// checkContinuesHost asserts the whole host → proxy → upstream tree of one
// call the host sent with hostTraceparent: the proxy's server span
// `tools/call <exposed>` (kind server, agent attribute) is a child of the
// host's span in the host's trace, and ct's client span is the server
// span's child. The downstream route's server spans make this hold; the
// test of the tree calls it with the spans of a call made with
// _meta.traceparent (stdio) or the traceparent header (HTTP).
func checkContinuesHost(t testing.TB, spans []otlptest.Span, ct callTrace, exposed, agent string) {
	t.Helper()
	var server *otlptest.Span
	for _, s := range otlptest.Find(spans, "tools/call "+exposed) {
		if s.Kind == "server" && s.SpanID == ct.Client.ParentSpanID {
			server = &s
			break
		}
	}
	if server == nil {
		t.Fatalf("client span %s has no server span %q as parent:\n%s", ct.Client.Name, "tools/call "+exposed, otlptest.Tree(spans))
		return
	}
	if server.TraceID != hostTrace || server.ParentSpanID != hostSpan {
		t.Errorf("server span in trace %s with parent %s; want the host's trace %s continued under %s",
			server.TraceID, server.ParentSpanID, hostTrace, hostSpan)
	}
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": exposed, "mcp_proxy.agent": agent} {
		if server.Attributes[k] != v {
			t.Errorf("server span %s = %q, want %q", k, server.Attributes[k], v)
		}
	}
	if ct.Client.TraceID != hostTrace {
		t.Errorf("client span in trace %s, want %s", ct.Client.TraceID, hostTrace)
	}
}

// TestTracingProxyToUpstream runs the real binary with tracing on against
// a real OTLP/HTTP receiver: every upstream tools/call has a client span
// with the MCP conventions' attributes, and the upstream (a stdio fixture
// and an HTTP fixture) receives that span's context.
func TestTracingProxyToUpstream(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	fx, fxRecord := recordedFixture(t, "fx", nil)
	webRecord := filepath.Join(t.TempDir(), "web.calls.jsonl")
	webURL := startFixtureHTTPEnv(t, []string{"FIXTURE_RECORD=" + webRecord})
	cfg := writeConfig(t, "tracing: {endpoint: "+q(rcv.Endpoint())+", service_name: proxy-under-test}\n",
		fx, httpServer("web", webURL))
	c := startStdioRaw(t, "mcp-proxy", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)
	if r := rawResult(t, c, "tools/call", `{"name":"fx__echo","arguments":{"text":"a"},"_meta":{"traceparent":"`+hostTraceparent+`","progressToken":"p"}}`); !strings.Contains(string(r), `"echo":"a"`) {
		t.Fatalf("fx__echo: %s", r)
	}
	if r := rawResult(t, c, "tools/call", `{"name":"web__echo","arguments":{"text":"b"}}`); !strings.Contains(string(r), `"echo":"b"`) {
		t.Fatalf("web__echo: %s", r)
	}
	// stdin EOF: the proxy shuts down, which flushes its spans.
	_ = c.in.Close()
	if err := c.p.wait(t, exitTimeout); err != nil {
		t.Fatalf("proxy exit: %v", err)
	}
	spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(otlptest.Find(s, "tools/call echo")) >= 2 })

	fxCall := callTraceOf(t, spans, fxRecord, "fx", "tools/call echo", false)
	webCall := callTraceOf(t, spans, webRecord, "web", "tools/call echo", true)
	// The host's call went host → proxy → upstream in one trace: the
	// proxy's server span continues the host's, the client span is its
	// child, and the upstream got the client span's context.
	checkContinuesHost(t, spans, fxCall, "fx__echo", "default")
	for _, tc := range []struct {
		ct   callTrace
		want map[string]string
	}{
		{fxCall, map[string]string{"network.transport": "pipe", "mcp.protocol.version": "2025-11-25"}},
		{webCall, map[string]string{"network.transport": "tcp", "server.address": "127.0.0.1"}},
	} {
		s := tc.ct.Client
		if s.Kind != "client" || s.Service != "proxy-under-test" {
			t.Errorf("%s: kind %s, service %q", s.Attributes["mcp_proxy.server"], s.Kind, s.Service)
		}
		tc.want["mcp.method.name"] = "tools/call"
		tc.want["gen_ai.tool.name"] = "echo"
		tc.want["mcp_proxy.outcome"] = "ok"
		for k, v := range tc.want {
			if s.Attributes[k] != v {
				t.Errorf("%s client span: %s = %q, want %q", s.Attributes["mcp_proxy.server"], k, s.Attributes[k], v)
			}
		}
		for k, v := range s.Attributes {
			if strings.Contains(v, `"a"`) || strings.Contains(v, "text") {
				t.Errorf("client span attribute %s = %q carries the arguments", k, v)
			}
		}
	}
	if webCall.Client.Attributes["mcp.session.id"] == "" {
		t.Error("HTTP upstream's client span has no mcp.session.id")
	}
	// The upstream sees the proxy's span as its parent, not the host's.
	if tp := deref(fxCall.Upstream.MetaTraceparent); strings.Contains(tp, hostSpan) {
		t.Errorf("the upstream got the host's traceparent %s; want the proxy's client span", tp)
	}
	if t.Failed() {
		t.Logf("spans:\n%s", otlptest.Tree(spans))
	}
}

// TestTracingHTTPHostHeader: a host that sends its trace context as the
// traceparent header of its POST sees its trace continued through the
// proxy to the upstream.
func TestTracingHTTPHostHeader(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	fx, record := recordedFixture(t, "fx", nil)
	cfg := writeConfig(t, "tracing: {endpoint: "+q(rcv.Endpoint())+"}\n", fx)
	url, p := startHTTPProxy(t, cfg)
	c := newHTTPRaw(url)
	c.header = http.Header{"Traceparent": {hostTraceparent}}
	rawInit(t, c)
	if r := rawResult(t, c, "tools/call", `{"name":"fx__echo","arguments":{"text":"a"}}`); !strings.Contains(string(r), `"echo":"a"`) {
		t.Fatalf("fx__echo: %s", r)
	}
	p.stop(t) // flushes the spans
	spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(otlptest.Find(s, "tools/call echo")) >= 1 })
	checkContinuesHost(t, spans, callTraceOf(t, spans, record, "fx", "tools/call echo", false), "fx__echo", "default")
	if t.Failed() {
		t.Logf("spans:\n%s", otlptest.Tree(spans))
	}
}

// TestTracingOffPassesMetaThrough: without tracing, nothing is added to an
// upstream request; a host's _meta.traceparent reaches the upstream as the
// host sent it.
func TestTracingOffPassesMetaThrough(t *testing.T) {
	fx, record := recordedFixture(t, "fx", nil)
	cfg := writeConfig(t, "", fx)
	cmd := proxyCmd("serve", "--config", cfg)
	cmd.Env = withoutOTELEnv(cmd.Env)
	c := startStdioRaw(t, "mcp-proxy", cmd)
	rawInit(t, c)
	rawResult(t, c, "tools/call", `{"name":"fx__echo","arguments":{"text":"a"}}`)
	rawResult(t, c, "tools/call", `{"name":"fx__echo","arguments":{"text":"b"},"_meta":{"traceparent":"`+hostTraceparent+`","tracestate":"h=1"}}`)
	recs := traceRecords(t, record, "tools/call")
	if len(recs) != 1 || deref(recs[0].MetaTraceparent) != hostTraceparent || deref(recs[0].MetaTracestate) != "h=1" {
		t.Errorf("upstream trace records %+v; want only the host's own context on the second call", recs)
	}
	for _, l := range recorded(t, record) {
		if strings.Contains(l, `"trace":{"method":"tools/list"`) {
			t.Errorf("discovery carried trace context with tracing off: %s", l)
		}
	}
}

// withoutOTELEnv drops OTEL_* variables, which could turn tracing on.
func withoutOTELEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return out
}

// auditLines reads an audit log the proxy wrote (stop the proxy first: it
// writes the queue at shutdown). Every line must be one JSON object with
// the members every audit line has.
func auditLines(t testing.TB, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Only whole lines: the proxy may be writing the next one right now.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	} else {
		data = nil
	}
	var out []map[string]any
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line is not JSON (%v): %s", err, line)
		}
		for _, k := range []string{"time", "agent", "client", "auth", "method", "target", "decision", "duration_ms"} {
			if _, ok := m[k]; !ok {
				t.Errorf("audit line lacks %s: %s", k, line)
			}
		}
		out = append(out, m)
	}
	return out
}
