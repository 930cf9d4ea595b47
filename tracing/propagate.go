package tracing

import (
	"context"
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
	if len(params) == 0 {
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
	var c metaCarrier
	t.prop.Inject(ctx, &c)
	if c.traceparent == "" {
		return params
	}
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	meta, ok, err := rawjson.Get(params, keyMeta)
	if err != nil {
		return params
	}
	if !ok {
		meta = json.RawMessage(`{}`)
	} else if len(meta) == 0 || meta[0] != '{' {
		return params
	}
	var next []byte
	switch _, stale, _ := rawjson.Get(meta, keyTracestate); {
	case c.tracestate != "":
		next, err = rawjson.SetMany(meta, rawjson.KV{Key: keyTraceparent, Value: rawjson.String(c.traceparent)},
			rawjson.KV{Key: keyTracestate, Value: rawjson.String(c.tracestate)})
	case stale:
		next, err = rawjson.Delete(meta, keyTracestate)
		if err == nil {
			next, err = rawjson.Set(next, keyTraceparent, rawjson.String(c.traceparent))
		}
	default: // the usual case: one walk, one copy
		next, err = rawjson.Set(meta, keyTraceparent, rawjson.String(c.traceparent))
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
