package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// The proxy's own attributes (docs/operations.md#traces).
const (
	AttrAgent      = attribute.Key("mcp_proxy.agent")
	AttrServer     = attribute.Key("mcp_proxy.server")
	AttrOutcome    = attribute.Key("mcp_proxy.outcome")
	AttrPolicyRule = attribute.Key("mcp_proxy.policy.rule")
	AttrApproval   = attribute.Key("mcp_proxy.approval")
)

// OutcomeOK is the outcome of a request that succeeded; every other
// outcome (the metrics' tool_error, error, timeout, canceled, denied, or a
// caller's own) marks the span as an error.
const OutcomeOK = "ok"

// Methods whose target is a name the conventions record.
const (
	methodToolsCall  = "tools/call"
	methodPromptsGet = "prompts/get"
)

// Transports of a request, for network.transport: stdio is a pipe,
// Streamable HTTP and SSE run over TCP.
const (
	TransportPipe = "pipe"
	TransportTCP  = "tcp"
)

// ServerRequest describes one downstream request for its server span.
// Only Header and Params._meta are read for the parent context; neither is
// recorded.
type ServerRequest struct {
	// Method is the JSON-RPC method (mcp.method.name).
	Method string
	// Target is the exposed tool name of tools/call or the prompt name of
	// prompts/get; "" for anything else (a resource URI is never a
	// target). The span is named "<Method> <Target>", or "<Method>".
	Target string
	// ID is the request's JSON-RPC id as it came (a JSON string or
	// number); nil for a notification.
	ID json.RawMessage
	// Params are the request's raw params; only _meta.traceparent and
	// _meta.tracestate are read.
	Params json.RawMessage
	// Header holds the HTTP request's headers; nil over stdio.
	Header http.Header
	// SessionID is the MCP session id ("" for none: stdio, stateless).
	SessionID string
	// Protocol is the session's MCP protocol version.
	Protocol string
	// Agent is the agent serving the request.
	Agent string
	// Transport is TransportPipe (stdio) or TransportTCP (HTTP).
	Transport string
	// Address and Port are the listener's host and port as the client
	// addressed them (server.address, server.port); "" and 0 over stdio.
	Address string
	Port    int
}

// ClientRequest describes one upstream request for its client span.
type ClientRequest struct {
	// Method is the JSON-RPC method.
	Method string
	// Params are the request's params; only "name" is read, for the target
	// of tools/call and prompts/get (the upstream's own name).
	Params json.RawMessage
	// ID is the request id sent upstream ("px-<n>").
	ID string
	// Server is the configured server name (mcp_proxy.server).
	Server string
	// Protocol is the protocol version negotiated with the server.
	Protocol string
	// SessionID is the upstream's MCP session id, if any.
	SessionID string
	// Transport is TransportPipe or TransportTCP.
	Transport string
	// Address and Port locate an HTTP or SSE server; "" and 0 for stdio.
	Address string
	Port    int
}

// Span is one of the proxy's spans. The zero Span (tracing off, or the
// span was not sampled) does nothing. A Span must be ended exactly once;
// its methods are safe for concurrent use.
type Span struct{ st *spanState }

// inlineAttrs is how many attributes a span keeps in its own state; more
// go to a slice of their own. A call's server span over HTTP has twelve
// (method, tool name and operation, request id, session, protocol,
// transport, address, port, agent, then server and outcome), fewer over
// stdio and on a client span; only a failure's error.type and
// rpc.response.status_code, a policy rule or an approval take it further
// (at most 16). Each attribute is 64 bytes, in every span.
const inlineAttrs = 12

// spanState is one sampled span: what the recorder (recorder.go) exports
// once it has ended. It is allocated once, with room for its attributes;
// a span that is not sampled has none and rides in ctx as its bare span
// context. It is also the trace.Span that ctx carries, so that the
// propagator, the samplers and trace.SpanContextFromContext find it as
// they would the SDK's.
//
// Until the span ends its fields below mu change only under mu; once
// ended is set nothing changes them again, and the batcher's goroutine,
// which receives the span through the queue's lock, reads them without
// mu.
type spanState struct {
	embedded.Span

	t      *Tracer
	server *spanState // the request's server span: itself, or its parent's
	sc     trace.SpanContext
	parent trace.SpanContext
	kind   trace.SpanKind
	start  time.Time

	mu         sync.Mutex
	name       string
	end        time.Time
	status     codes.Code
	statusText string // with codes.Error only
	outcomeSet bool
	ended      atomic.Bool // set under mu; read without it by IsRecording
	n          int
	attrs      [inlineAttrs]attribute.KeyValue
	more       []attribute.KeyValue // after attrs is full
	dropped    int                  // attributes that did not fit
}

var _ trace.Span = (*spanState)(nil)

// setLocked records kv, replacing an earlier value of its key (the last
// one wins, as with SetAttributes). It drops kv when the span has ended or
// is full. st.mu must be held.
func (st *spanState) setLocked(kv attribute.KeyValue) {
	if st.ended.Load() || !kv.Valid() {
		return
	}
	for i := range st.n {
		if st.attrs[i].Key == kv.Key {
			st.attrs[i] = kv
			return
		}
	}
	for i := range st.more {
		if st.more[i].Key == kv.Key {
			st.more[i] = kv
			return
		}
	}
	switch {
	case st.n < len(st.attrs):
		st.attrs[st.n] = kv
		st.n++
	case len(st.more) < maxMoreAttrs:
		st.more = append(st.more, kv)
	default:
		st.dropped++
	}
}

// maxMoreAttrs bounds the attributes beyond inlineAttrs: no span of the
// proxy sets more than sixteen different keys. More (SetAttributes through
// the trace.Span in ctx) are dropped, and counted as OTLP's dropped
// attributes.
const maxMoreAttrs = 4

// set is setLocked with the lock taken.
func (st *spanState) set(kv attribute.KeyValue) {
	st.mu.Lock()
	st.setLocked(kv)
	st.mu.Unlock()
}

// setStatusLocked sets the span's status as the SDK does: a status ranks
// above the ones before it (Unset, Error, Ok) or is ignored, and only an
// Error keeps its description. st.mu must be held.
func (st *spanState) setStatusLocked(code codes.Code, text string) {
	if st.ended.Load() || code < st.status {
		return
	}
	st.status, st.statusText = code, ""
	if code == codes.Error {
		st.statusText = text
	}
}

// endLocked ends the span; st.mu must be held, and is released. The span
// goes to the batcher once.
func (st *spanState) endLocked() {
	if st.ended.Load() {
		st.mu.Unlock()
		return
	}
	st.end = st.start.Add(time.Since(st.start)) // on the monotonic clock
	st.ended.Store(true)
	st.mu.Unlock()
	st.t.batch.enqueue(st)
}

// attributes calls f with each of the span's attributes, in the order they
// were first set; only after the span has ended.
func (st *spanState) attributes(f func(attribute.KeyValue)) {
	for _, kv := range st.attrs[:st.n] {
		f(kv)
	}
	for _, kv := range st.more {
		f(kv)
	}
}

// The trace.Span methods, for code that finds the span in ctx through
// OpenTelemetry's API. The proxy itself uses Span.

// SpanContext implements trace.Span.
func (st *spanState) SpanContext() trace.SpanContext { return st.sc }

// IsRecording implements trace.Span.
func (st *spanState) IsRecording() bool { return !st.ended.Load() }

// SetStatus implements trace.Span.
func (st *spanState) SetStatus(code codes.Code, description string) {
	st.mu.Lock()
	st.setStatusLocked(code, description)
	st.mu.Unlock()
}

// SetAttributes implements trace.Span.
func (st *spanState) SetAttributes(kv ...attribute.KeyValue) {
	st.mu.Lock()
	for _, a := range kv {
		st.setLocked(a)
	}
	st.mu.Unlock()
}

// SetName implements trace.Span.
func (st *spanState) SetName(name string) {
	st.mu.Lock()
	if !st.ended.Load() {
		st.name = name
	}
	st.mu.Unlock()
}

// End implements trace.Span; its options are ignored.
func (st *spanState) End(...trace.SpanEndOption) {
	st.mu.Lock()
	st.endLocked()
}

// AddEvent implements trace.Span. The proxy's spans carry no events (its
// exports have none to send), so an event is dropped.
func (st *spanState) AddEvent(string, ...trace.EventOption) {}

// AddLink implements trace.Span; like events, links are dropped.
func (st *spanState) AddLink(trace.Link) {}

// RecordError implements trace.Span; it records an exception event, which
// is dropped like any other.
func (st *spanState) RecordError(error, ...trace.EventOption) {}

// TracerProvider implements trace.Span. Spans started from it are not the
// proxy's, and are not exported.
func (st *spanState) TracerProvider() trace.TracerProvider { return noop.NewTracerProvider() }

// IsRecording reports whether the span records attributes: callers may
// skip work that only feeds a span.
func (s Span) IsRecording() bool { return s.st != nil && !s.st.ended.Load() }

// SetServer records the upstream server a request was routed to.
func (s Span) SetServer(server string) {
	if s.IsRecording() && server != "" {
		s.st.set(AttrServer.String(server))
	}
}

// SetPolicyRule records the policy rule that refused the request (the
// rule names of docs/agents.md#the-policy-rules: excluded_tools, read_only, ...).
func (s Span) SetPolicyRule(rule string) {
	if s.IsRecording() && rule != "" {
		s.st.set(AttrPolicyRule.String(rule))
	}
}

// SetApproval records the answer to an approval question (approve, always,
// deny, decline, cancel, timeout, unsupported, error).
func (s Span) SetApproval(decision string) {
	if s.IsRecording() && decision != "" {
		s.st.set(AttrApproval.String(decision))
	}
}

// SetOutcome records the request's outcome without ending the span: a
// step deeper in the call path that knows it best (the tools/call chain:
// denied, tool_error, timeout) sets it, and End's own outcome is then
// only the fallback. outcome is OutcomeOK or a failure such as the
// metrics' tool_error, error, timeout, canceled or denied; rpcCode is the
// JSON-RPC error code answered, 0 for none. A failure sets the span status
// to Error and error.type to the code when there is one (also recorded as
// rpc.response.status_code), else to the outcome. A later SetOutcome
// replaces the outcome attribute, but a span once marked as failed stays
// failed (OpenTelemetry keeps the Error status); "" does nothing.
func (s Span) SetOutcome(outcome string, rpcCode int) {
	if !s.IsRecording() || outcome == "" {
		return
	}
	s.st.mu.Lock()
	s.st.setOutcomeLocked(outcome, rpcCode)
	s.st.mu.Unlock()
}

// setOutcomeLocked is SetOutcome's work; st.mu must be held.
func (st *spanState) setOutcomeLocked(outcome string, rpcCode int) {
	if st.ended.Load() {
		return
	}
	st.outcomeSet = true
	st.setLocked(AttrOutcome.String(outcome))
	if outcome == OutcomeOK {
		return
	}
	errType := outcome
	if rpcCode != 0 {
		errType = strconv.Itoa(rpcCode)
		st.setLocked(semconv.RPCResponseStatusCode(errType))
	}
	st.setLocked(semconv.ErrorTypeKey.String(errType))
	st.setStatusLocked(codes.Error, errType)
}

// End ends the span. Its outcome and rpcCode (see SetOutcome) are recorded
// only when no SetOutcome came first: the starter of a span passes what it
// can see (ok, or error and the code of the JSON-RPC error it answers),
// and a step that knew better has already said so.
func (s Span) End(outcome string, rpcCode int) {
	st := s.st
	if st == nil {
		return
	}
	st.mu.Lock()
	if !st.outcomeSet && outcome != "" {
		st.setOutcomeLocked(outcome, rpcCode)
	}
	st.endLocked()
}

// SpanFromContext returns the server span of the request ctx belongs to
// (StartServer's, also from inside a client span's ctx), to set attributes
// on it: SetServer, SetPolicyRule, SetApproval, SetOutcome. Whoever started
// the span ends it; the caller must not. With tracing off, or a ctx
// without a server span, it is the zero Span.
func (t *Tracer) SpanFromContext(ctx context.Context) Span {
	if t == nil {
		return Span{}
	}
	if st, ok := trace.SpanFromContext(ctx).(*spanState); ok {
		return Span{st.server}
	}
	return Span{}
}

// start starts a span named name as a child of the span context in ctx,
// when the sampler samples it, and returns a ctx holding the span (or,
// not sampled, just its span context, which propagates as the SDK's
// unsampled spans do). A span the sampler would record without sampling
// it is not kept: the batch processor exports sampled spans only.
func (t *Tracer) start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, *spanState) {
	parent := trace.SpanContextFromContext(ctx)
	tid, sid := newIDs(parent)
	res := t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: name, Kind: kind})
	flags := parent.TraceFlags() &^ trace.FlagsSampled
	if res.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: res.Tracestate})
	if res.Decision != sdktrace.RecordAndSample {
		return trace.ContextWithSpanContext(ctx, sc), nil
	}
	st := &spanState{t: t, sc: sc, parent: parent, kind: kind, name: name, start: time.Now()}
	if kind == trace.SpanKindServer {
		st.server = st
	} else if p, ok := trace.SpanFromContext(ctx).(*spanState); ok {
		st.server = p.server
	}
	return trace.ContextWithSpan(ctx, st), st
}

// StartServer starts the server span of one downstream request, as a child
// of the trace context the request carries (see the package doc), and
// returns a ctx holding it: the upstream request made with that ctx is its
// child. The caller ends the span once the response is written or dropped.
func (t *Tracer) StartServer(ctx context.Context, r ServerRequest) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if r.Header != nil && r.Header.Get("traceparent") != "" {
		ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	if tp, ts := metaTraceContext(r.Params); tp != "" {
		ctx = t.prop.Extract(ctx, &metaCarrier{traceparent: tp, tracestate: ts})
	}
	ctx, st := t.start(ctx, t.names.name(r.Method, r.Target), trace.SpanKindServer)
	if st == nil {
		return ctx, Span{}
	}
	st.add(semconv.McpMethodNameKey.String(r.Method))
	st.addTarget(r.Method, r.Target)
	if id := requestID(r.ID); id != "" {
		st.add(semconv.JSONRPCRequestID(id))
	}
	st.addCommon(r.SessionID, r.Protocol, r.Transport, r.Address, r.Port)
	if r.Agent != "" {
		st.add(AttrAgent.String(r.Agent))
	}
	return ctx, Span{st}
}

// StartClient starts the client span of one upstream request, a child of
// the span in ctx (the downstream request's, when there is one), and
// returns a ctx holding it. Pass that ctx to InjectMeta and to the HTTP
// request, so the upstream sees this span as its parent.
func (t *Tracer) StartClient(ctx context.Context, r ClientRequest) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	target := ""
	if r.Method == methodToolsCall || r.Method == methodPromptsGet {
		target = paramName(r.Params)
	}
	ctx, st := t.start(ctx, t.names.name(r.Method, target), trace.SpanKindClient)
	if st == nil {
		return ctx, Span{}
	}
	st.add(semconv.McpMethodNameKey.String(r.Method))
	st.addTarget(r.Method, target)
	if r.ID != "" {
		st.add(semconv.JSONRPCRequestID(r.ID))
	}
	st.addCommon(r.SessionID, r.Protocol, r.Transport, r.Address, r.Port)
	if r.Server != "" {
		st.add(AttrServer.String(r.Server))
	}
	return ctx, Span{st}
}

// TraceID returns the hex trace id of the span in ctx, "" when there is
// none (tracing off). Logs and the audit log carry it to find the trace.
func (t *Tracer) TraceID(ctx context.Context) string {
	if t == nil {
		return ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// add appends a start attribute, whose key is new to the span; only the
// span's starter calls it, before anyone else sees st. A span starts with
// at most ten, all of them in attrs.
func (st *spanState) add(kv attribute.KeyValue) {
	st.attrs[st.n] = kv
	st.n++
}

// addTarget adds the conventions' name of a tool or prompt target.
func (st *spanState) addTarget(method, target string) {
	if target == "" {
		return
	}
	switch method {
	case methodToolsCall:
		st.add(semconv.GenAIToolName(target))
		st.add(semconv.GenAIOperationNameExecuteTool)
	case methodPromptsGet:
		st.add(semconv.GenAIPromptName(target))
	}
}

// addCommon adds the attributes server and client spans share.
func (st *spanState) addCommon(session, protocol, transport, address string, port int) {
	if session != "" {
		st.add(semconv.McpSessionID(session))
	}
	if protocol != "" {
		st.add(semconv.McpProtocolVersion(protocol))
	}
	if transport != "" {
		st.add(semconv.NetworkTransportKey.String(transport))
	}
	if address != "" {
		st.add(semconv.ServerAddress(address))
		if port > 0 {
			st.add(semconv.ServerPort(port))
		}
	}
}

// requestID is the string form of a JSON-RPC id: a string's content, a
// number's spelling; "" for none or null.
func requestID(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		return jsonString(raw)
	}
	return string(raw)
}

// paramName is the string member "name" of params, "" when absent.
func paramName(params json.RawMessage) string {
	if len(params) == 0 {
		return ""
	}
	v, ok, err := rawjson.Get(params, "name")
	if err != nil || !ok {
		return ""
	}
	return jsonString(v)
}

// jsonString decodes a JSON string value; "" for anything else.
func jsonString(v json.RawMessage) string {
	s, err := rawjson.Unquote(v)
	if err != nil {
		return ""
	}
	return s
}
