package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// W3C trace context keys, in HTTP headers and in params._meta alike.
const (
	keyTraceparent = "traceparent"
	keyTracestate  = "tracestate"
	keyMeta        = "_meta"
)

// maxMetaValue bounds a traceparent or tracestate value read from _meta:
// a traceparent is 55 bytes and W3C caps tracestate at 32 members of at
// most 256 bytes, so anything longer is not one.
const maxMetaValue = 8192

// metaCarrier holds the two trace context values of one message; it is
// the propagator's view of params._meta.
type metaCarrier struct{ traceparent, tracestate string }

var _ propagation.TextMapCarrier = (*metaCarrier)(nil)

func (c *metaCarrier) Get(key string) string {
	switch key {
	case keyTraceparent:
		return c.traceparent
	case keyTracestate:
		return c.tracestate
	}
	return ""
}

func (c *metaCarrier) Set(key, value string) {
	switch key {
	case keyTraceparent:
		c.traceparent = value
	case keyTracestate:
		c.tracestate = value
	}
}

func (c *metaCarrier) Keys() []string { return []string{keyTraceparent, keyTracestate} }

// metaTraceContext reads params._meta.traceparent and tracestate without
// decoding the rest of params; "" for what is absent, not a string, or
// malformed JSON.
func metaTraceContext(params json.RawMessage) (traceparent, tracestate string) {
	if !mayHold(params, keyTraceparent) {
		return "", ""
	}
	meta, ok, err := rawjson.Get(params, keyMeta)
	if err != nil || !ok || len(meta) == 0 || meta[0] != '{' {
		return "", ""
	}
	return metaValue(meta, keyTraceparent), metaValue(meta, keyTracestate)
}

func metaValue(meta json.RawMessage, key string) string {
	v, ok, err := rawjson.Get(meta, key)
	if err != nil || !ok || len(v) > maxMetaValue {
		return ""
	}
	return jsonString(v)
}

// InjectMeta returns params with the span context of ctx written into
// _meta.traceparent (and _meta.tracestate, which is removed when the
// context has none, so a stale value cannot pair with a new parent). Every
// other byte of params is kept: members are spliced with rawjson, never
// re-encoded. Empty params become {"_meta":{...}}. params is returned
// unchanged, with no allocation, when t is nil or ctx holds no valid span
// context, and also when params is not a JSON object or its _meta is not
// one (the request goes as it came, without propagation). params is never
// modified.
func (t *Tracer) InjectMeta(ctx context.Context, params json.RawMessage) json.RawMessage {
	if t == nil {
		return params
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return params
	}
	tracestate := sc.TraceState().String()
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	var (
		meta json.RawMessage
		ok   bool
		err  error
	)
	// Without a _meta member the walk is Set's, below, which checks params
	// as it adds one.
	if mayHold(params, keyMeta) {
		meta, ok, err = rawjson.Get(params, keyMeta)
		if err != nil || ok && (len(meta) == 0 || meta[0] != '{') {
			return params
		}
	}
	var next []byte
	switch _, stale, _ := rawjson.Get(meta, keyTracestate); {
	case !ok && tracestate == "": // the usual case: _meta written whole, one copy of params
		next = append(make([]byte, 0, len(metaOpen)+traceparentLen+len(metaClose)), metaOpen...)
		next = append(appendTraceparent(next, sc), metaClose...)
	case !ok:
		meta = json.RawMessage(`{}`)
		fallthrough
	case tracestate != "":
		next, err = rawjson.SetMany(meta, rawjson.KV{Key: keyTraceparent, Value: quotedTraceparent(sc)},
			rawjson.KV{Key: keyTracestate, Value: rawjson.String(tracestate)})
	case stale:
		next, err = rawjson.Delete(meta, keyTracestate)
		if err == nil {
			next, err = rawjson.Set(next, keyTraceparent, quotedTraceparent(sc))
		}
	default:
		if out, ok := spliceTraceparent(params, meta, sc); ok {
			return out // the usual case with a _meta: one copy of params
		}
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

// mayHold reports whether JSON text b may hold a member named key: it
// holds the key's bytes, or a \u escape, which can spell a key's letters
// (found then by decoding). A search of the bytes is much faster than a
// walk of params, and most requests carry no trace context.
func mayHold(b []byte, key string) bool {
	return len(b) > 0 && (bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte(`\u`)))
}

// spliceTraceparent returns params with a traceparent member added last to
// meta, its _meta object as rawjson.Get returns it (a sub-slice of params),
// in one copy: the bytes rawjson.Set of meta and then of params make. It
// is not ok, and InjectMeta sets them so, when meta has a traceparent
// already (Set replaces it where it is) or params is not a valid object
// (Set fails and the params go as they came).
func spliceTraceparent(params, meta []byte, sc trace.SpanContext) ([]byte, bool) {
	start := cap(params) - cap(meta)
	if len(meta) < 2 || start < 0 || start+len(meta) > len(params) || &params[start] != &meta[0] {
		return nil, false
	}
	if _, has, err := rawjson.Get(meta, keyTraceparent); err != nil || has || rawjson.Object(params) != nil {
		return nil, false
	}
	// Set adds a member after the last one's value, before the blanks
	// that may come ahead of the closing brace, or just after the opening
	// brace of an empty object.
	at := start + len(meta) - 1
	for params[at-1] == ' ' || params[at-1] == '\t' || params[at-1] == '\n' || params[at-1] == '\r' {
		at--
	}
	empty := at == start+1
	out := make([]byte, 0, len(params)+1+len(`"`+keyTraceparent+`":`)+traceparentLen)
	out = append(out, params[:at]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, `"`+keyTraceparent+`":`...)
	out = appendTraceparent(out, sc)
	return append(out, params[at:]...), true
}

// The _meta object of params that had none, around its traceparent.
const (
	metaOpen  = `{"` + keyTraceparent + `":`
	metaClose = `}`
)

// traceparentLen is the length of a version 00 traceparent, quotes
// included: "00-<32 hex>-<16 hex>-<2 hex>".
const traceparentLen = 2 + 2 + 1 + 32 + 1 + 16 + 1 + 2

// quotedTraceparent is the W3C traceparent of sc as a JSON string, as the
// TraceContext propagator writes it: version 00 and, of the flags, only
// sampled and random (the ones the W3C spec defines).
func quotedTraceparent(sc trace.SpanContext) []byte {
	return appendTraceparent(make([]byte, 0, traceparentLen), sc)
}

// appendTraceparent appends quotedTraceparent(sc) to b.
func appendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, `"00-`...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))})
	return append(b, '"')
}

// InjectHeader sets the traceparent (and tracestate) headers of an HTTP
// request from the span context of ctx. It does nothing when t is nil or
// ctx holds no valid span context. h must belong to a request the caller
// owns (a RoundTripper clones its request first).
func (t *Tracer) InjectHeader(ctx context.Context, h http.Header) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// Propagates reports whether InjectHeader would write anything for ctx:
// a RoundTripper tests it before cloning a request.
func (t *Tracer) Propagates(ctx context.Context) bool {
	return t != nil && trace.SpanContextFromContext(ctx).IsValid()
}
