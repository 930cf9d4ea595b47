package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
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

// attrKey is one of the attributes the proxy's own spans record. A span
// keeps their values in fields of its own, not as attribute.KeyValues (64
// bytes each), which halved the size of a span; attributes set through the
// trace.Span in ctx under other keys are kept apart.
type attrKey uint8

const (
	akMethod    attrKey = iota // mcp.method.name
	akToolName                 // gen_ai.tool.name
	akOperation                // gen_ai.operation.name
	akPrompt                   // gen_ai.prompt.name
	akRequestID                // jsonrpc.request.id
	akSession                  // mcp.session.id
	akProtocol                 // mcp.protocol.version
	akTransport                // network.transport
	akAddress                  // server.address
	akPort                     // server.port, the one number
	akAgent                    // mcp_proxy.agent
	akServer                   // mcp_proxy.server
	akOutcome                  // mcp_proxy.outcome
	akRule                     // mcp_proxy.policy.rule
	akApproval                 // mcp_proxy.approval
	akErrorType                // error.type
	akRPCStatus                // rpc.response.status_code
	numAttrKeys
)

// attrKeys are the attributes' keys, by attrKey.
var attrKeys = [numAttrKeys]attribute.Key{
	akMethod:    semconv.McpMethodNameKey,
	akToolName:  semconv.GenAIToolNameKey,
	akOperation: semconv.GenAIOperationNameKey,
	akPrompt:    semconv.GenAIPromptNameKey,
	akRequestID: semconv.JSONRPCRequestIDKey,
	akSession:   semconv.McpSessionIDKey,
	akProtocol:  semconv.McpProtocolVersionKey,
	akTransport: semconv.NetworkTransportKey,
	akAddress:   semconv.ServerAddressKey,
	akPort:      semconv.ServerPortKey,
	akAgent:     AttrAgent,
	akServer:    AttrServer,
	akOutcome:   AttrOutcome,
	akRule:      AttrPolicyRule,
	akApproval:  AttrApproval,
	akErrorType: semconv.ErrorTypeKey,
	akRPCStatus: semconv.RPCResponseStatusCodeKey,
}

// attrKeyOf finds the attrKey of a key set through trace.Span.
var attrKeyOf = func() map[attribute.Key]attrKey {
	m := make(map[attribute.Key]attrKey, numAttrKeys)
	for k, key := range attrKeys {
		m[key] = attrKey(k)
	}
	return m
}()

// operationExecuteTool is gen_ai.operation.name of a tool call.
var operationExecuteTool = semconv.GenAIOperationNameExecuteTool.Value.AsString()

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
	ended      atomic.Bool          // set under mu; read without it by IsRecording
	has        uint32               // the attrKeys set, a bit each
	vals       [numAttrKeys]string  // their values, but akPort's
	port       int64                // akPort's
	more       []attribute.KeyValue // under other keys, set through trace.Span
	dropped    int                  // attributes that did not fit
}

var _ trace.Span = (*spanState)(nil)

// setLocked records kv, set through trace.Span, replacing an earlier value
// of its key (the last one wins, as with SetAttributes). A key of the
// proxy's own with its usual type goes to its field. It drops kv when the
// span has ended, and counts it when the span is full. st.mu must be held.
func (st *spanState) setLocked(kv attribute.KeyValue) {
	if st.ended.Load() || !kv.Valid() {
		return
	}
	if k, ok := attrKeyOf[kv.Key]; ok {
		switch t := kv.Value.Type(); {
		case k == akPort && t == attribute.INT64:
			st.port = kv.Value.AsInt64()
			st.ownLocked(k, "")
			return
		case k != akPort && t == attribute.STRING:
			st.ownLocked(k, kv.Value.AsString())
			return
		}
		st.has &^= 1 << k // another type: kept with the other keys
	}
	for i := range st.more {
		if st.more[i].Key == kv.Key {
			st.more[i] = kv
			return
		}
	}
	if len(st.more) < maxMoreAttrs {
		st.more = append(st.more, kv)
	} else {
		st.dropped++
	}
}

// maxMoreAttrs bounds the attributes under keys other than attrKeys (none
// of the proxy's own): more are dropped, and counted as OTLP's dropped
// attributes.
const maxMoreAttrs = 16

// ownLocked sets the attribute k to v (akPort's value is st.port),
// replacing one set under its key through trace.Span. It does nothing once
// the span has ended. st.mu must be held, or the span not yet shared.
func (st *spanState) ownLocked(k attrKey, v string) {
	if st.ended.Load() {
		return
	}
	st.has |= 1 << k
	st.vals[k] = v
	if len(st.more) > 0 {
		st.more = slices.DeleteFunc(st.more, func(kv attribute.KeyValue) bool { return kv.Key == attrKeys[k] })
	}
}

// own is ownLocked with the lock taken.
func (st *spanState) own(k attrKey, v string) {
	st.mu.Lock()
	st.ownLocked(k, v)
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

// attributes calls f with each of the span's attributes: the proxy's own in
// attrKey order, then the others in the order they were first set; only
// after the span has ended.
func (st *spanState) attributes(f func(attribute.KeyValue)) {
	for k := range numAttrKeys {
		switch {
		case st.has&(1<<k) == 0:
		case k == akPort:
			f(attribute.Int64(string(attrKeys[k]), st.port))
		default:
			f(attribute.KeyValue{Key: attrKeys[k], Value: attribute.StringValue(st.vals[k])})
		}
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
		s.st.own(akServer, server)
	}
}

// SetPolicyRule records the policy rule that refused the request (the
// rule names of docs/agents.md#the-policy-rules: excluded_tools, read_only, ...).
func (s Span) SetPolicyRule(rule string) {
	if s.IsRecording() && rule != "" {
		s.st.own(akRule, rule)
	}
}

// SetApproval records the answer to an approval question (approve, always,
// deny, decline, cancel, timeout, unsupported, error).
func (s Span) SetApproval(decision string) {
	if s.IsRecording() && decision != "" {
		s.st.own(akApproval, decision)
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
	st.ownLocked(akOutcome, outcome)
	if outcome == OutcomeOK {
		return
	}
	errType := outcome
	if rpcCode != 0 {
		errType = strconv.Itoa(rpcCode)
		st.ownLocked(akRPCStatus, errType)
	}
	st.ownLocked(akErrorType, errType)
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
	st.add(akMethod, r.Method)
	st.addTarget(r.Method, r.Target)
	if id := requestID(r.ID); id != "" {
		st.add(akRequestID, id)
	}
	st.addCommon(r.SessionID, r.Protocol, r.Transport, r.Address, r.Port)
	if r.Agent != "" {
		st.add(akAgent, r.Agent)
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
	st.add(akMethod, r.Method)
	st.addTarget(r.Method, target)
	if r.ID != "" {
		st.add(akRequestID, r.ID)
	}
	st.addCommon(r.SessionID, r.Protocol, r.Transport, r.Address, r.Port)
	if r.Server != "" {
		st.add(akServer, r.Server)
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

// add sets a start attribute; only the span's starter calls it, before
// anyone else sees st.
func (st *spanState) add(k attrKey, v string) {
	st.has |= 1 << k
	st.vals[k] = v
}

// addTarget adds the conventions' name of a tool or prompt target.
func (st *spanState) addTarget(method, target string) {
	if target == "" {
		return
	}
	switch method {
	case methodToolsCall:
		st.add(akToolName, target)
		st.add(akOperation, operationExecuteTool)
	case methodPromptsGet:
		st.add(akPrompt, target)
	}
}

// addCommon adds the attributes server and client spans share.
func (st *spanState) addCommon(session, protocol, transport, address string, port int) {
	if session != "" {
		st.add(akSession, session)
	}
	if protocol != "" {
		st.add(akProtocol, protocol)
	}
	if transport != "" {
		st.add(akTransport, transport)
	}
	if address != "" {
		st.add(akAddress, address)
		if port > 0 {
			st.port = int64(port)
			st.add(akPort, "")
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
