package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// childOf returns a ctx holding a client span whose parent is the fixed
// remote context parent ("00-<trace>-<span>-01") with tracestate state.
func childOf(t *testing.T, tr *Tracer, parent, state string) (context.Context, trace.SpanContext) {
	t.Helper()
	ctx, _ := tr.StartServer(context.Background(), ServerRequest{Method: "tools/call",
		Header: http.Header{"Traceparent": {parent}, "Tracestate": {state}}})
	ctx, _ = tr.StartClient(ctx, ClientRequest{Method: "tools/call"})
	return ctx, trace.SpanContextFromContext(ctx)
}

func TestInjectMeta(t *testing.T) {
	tr, _ := memTracer(t)
	ctx, sc := childOf(t, tr, hostParent, "")
	tp := `"traceparent":"00-` + sc.TraceID().String() + `-` + sc.SpanID().String() + `-01"`
	tests := []struct {
		name, in, want string
	}{
		{"empty params", ``, `{"_meta":{` + tp + `}}`},
		{"empty object", `{}`, `{"_meta":{` + tp + `}}`},
		{"bytes kept", `{"name":"echo", "arguments":{"n":1e400,"s":"\u00e9<"}}`, `{"name":"echo", "arguments":{"n":1e400,"s":"\u00e9<"},"_meta":{` + tp + `}}`},
		{"existing meta kept in place", `{"_meta":{"progressToken":7},"name":"x"}`, `{"_meta":{"progressToken":7,` + tp + `},"name":"x"}`},
		{"host's traceparent replaced, stale tracestate dropped",
			`{"_meta":{"traceparent":"` + hostParent + `","tracestate":"old=1","k":true}}`,
			`{"_meta":{` + tp + `,"k":true}}`},
		{"meta not an object", `{"_meta":null,"name":"x"}`, `{"_meta":null,"name":"x"}`},
		{"not an object", `[1,2]`, `[1,2]`},
		{"invalid JSON", `{"a":`, `{"a":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			keep := bytes.Clone(in)
			got := string(tr.InjectMeta(ctx, in))
			if got != tt.want {
				t.Errorf("InjectMeta(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if !bytes.Equal(in, keep) {
				t.Errorf("params modified: %s", in)
			}
		})
	}
	t.Run("tracestate carried", func(t *testing.T) {
		ctx, sc := childOf(t, tr, hostParent, "vendor=abc")
		got := string(tr.InjectMeta(ctx, json.RawMessage(`{"_meta":{"tracestate":"old=1"}}`)))
		want := `{"_meta":{"tracestate":"vendor=abc","traceparent":"00-` + sc.TraceID().String() + `-` + sc.SpanID().String() + `-01"}}`
		if got != want {
			t.Errorf("got %s\nwant %s", got, want)
		}
	})
	t.Run("no span in ctx", func(t *testing.T) {
		in := json.RawMessage(`{"a":1}`)
		if got := tr.InjectMeta(context.Background(), in); &got[0] != &in[0] {
			t.Errorf("params replaced without a span: %s", got)
		}
	})
}

func TestInjectHeader(t *testing.T) {
	tr, _ := memTracer(t)
	ctx, sc := childOf(t, tr, hostParent, "vendor=abc")
	h := http.Header{}
	if !tr.Propagates(ctx) || tr.Propagates(context.Background()) {
		t.Error("Propagates disagrees with the ctx")
	}
	tr.InjectHeader(ctx, h)
	want := http.Header{
		"Traceparent": {"00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"},
		"Tracestate":  {"vendor=abc"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	h = http.Header{}
	tr.InjectHeader(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("headers without a span: %v", h)
	}
}

// FuzzInjectMeta: whatever the params, InjectMeta never panics, never
// changes its input, and either returns it as it is or returns valid JSON
// whose members other than _meta are byte for byte the input's and whose
// _meta holds the span's traceparent.
func FuzzInjectMeta(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"_meta":{}}`, `{"_meta":null}`, `{"a":1,"_meta":{"traceparent":"x","tracestate":"y"}}`,
		`{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`, `[]`, `{"a":"\ud800"}`, `{"_meta":{"a":{"b":[1,2,{"c":3}]}}, "z" : 0 }`,
		`{"_meta":1,"_meta":{}}`, `{"_meta":{ } }`, `{"_meta":{"progressToken":7 	},"a":[1]}`, `{"_meta":{"a":1},"b":`,
		`{"_meta":{"a":1}} x`, `{"_meta":{"traceparent":1, "x":2}}`} {
		f.Add([]byte(s))
	}
	tr := newTracer(discardExporter{}, sdktrace.ParentBased(sdktrace.AlwaysSample()), testBatch(f), zerolog.Nop(), func(error) {})
	f.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, params []byte) {
		ctx, _ := tr.StartClient(context.Background(), ClientRequest{Method: "m"})
		sc := trace.SpanContextFromContext(ctx)
		tp := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		keep := bytes.Clone(params)
		out := tr.InjectMeta(ctx, params)
		if !bytes.Equal(params, keep) {
			t.Fatal("input modified")
		}
		if want := injectMetaBySet(sc, params); !bytes.Equal(out, want) {
			t.Fatalf("InjectMeta(%q) = %q, setting the members one at a time gives %q", params, out, want)
		}
		if bytes.Equal(out, params) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q from %q", out, params)
		}
		if gotTP, _ := metaTraceContext(out); gotTP != tp {
			t.Fatalf("output %q carries traceparent %q, want %q", out, gotTP, tp)
		}
		if len(params) == 0 {
			return
		}
		// Every member but _meta keeps its bytes.
		rest := func(b []byte) string {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("decode %q: %v", b, err)
			}
			delete(m, "_meta")
			var parts []string
			for k, v := range m {
				parts = append(parts, k+"="+string(v))
			}
			sort.Strings(parts)
			return strings.Join(parts, ",")
		}
		if rest(out) != rest(params) {
			t.Fatalf("members other than _meta changed:\n in %q\nout %q", params, out)
		}
	})
}

// injectMetaBySet is what InjectMeta did before it spliced a traceparent
// into an existing _meta itself: the members set with rawjson, _meta's and
// then params'. Its output is the reference FuzzInjectMeta holds
// InjectMeta to.
func injectMetaBySet(sc trace.SpanContext, params json.RawMessage) json.RawMessage {
	tracestate := sc.TraceState().String()
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	meta, ok, err := rawjson.Get(params, keyMeta)
	if err != nil || ok && (len(meta) == 0 || meta[0] != '{') {
		return params
	}
	if !ok {
		meta = json.RawMessage(`{}`)
	}
	_, stale, _ := rawjson.Get(meta, keyTracestate)
	var next []byte
	switch {
	case tracestate != "":
		next, err = rawjson.SetMany(meta, rawjson.KV{Key: keyTraceparent, Value: quotedTraceparent(sc)},
			rawjson.KV{Key: keyTracestate, Value: rawjson.String(tracestate)})
	case stale:
		next, err = rawjson.Delete(meta, keyTracestate)
		if err == nil {
			next, err = rawjson.Set(next, keyTraceparent, quotedTraceparent(sc))
		}
	default:
		next, err = rawjson.Set(meta, keyTraceparent, quotedTraceparent(sc))
	}
	if err != nil {
		return params
	}
	out, err := rawjson.Set(params, keyMeta, next)
	if err != nil {
		return params
	}
	return out
}

// TestQuotedTraceparent: the traceparent InjectMeta writes is the W3C
// propagator's (the one InjectHeader uses), whatever the trace flags.
func TestQuotedTraceparent(t *testing.T) {
	tr, _ := memTracer(t)
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled, trace.FlagsRandom, trace.FlagsSampled | trace.FlagsRandom, 0xff} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:     trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			TraceFlags: flags})
		h := http.Header{}
		tr.InjectHeader(trace.ContextWithSpanContext(context.Background(), sc), h)
		want := `"` + h.Get("traceparent") + `"`
		if got := string(quotedTraceparent(sc)); got != want || len(got) != traceparentLen {
			t.Errorf("flags %02x: quotedTraceparent = %s, the propagator writes %s", byte(flags), got, want)
		}
	}
}

// TestInjectMetaOneCopy: params that have a _meta without trace context,
// as a client's calls usually do (a progress token), get the traceparent
// in one allocation: the new params, no intermediate _meta.
func TestInjectMetaOneCopy(t *testing.T) {
	tr, _ := memTracer(t)
	ctx, _ := childOf(t, tr, hostParent, "")
	if n := testing.AllocsPerRun(100, func() { tr.InjectMeta(ctx, benchParams) }); n != 1 {
		t.Errorf("InjectMeta(%s): %.0f allocations, want 1", benchParams, n)
	}
}
