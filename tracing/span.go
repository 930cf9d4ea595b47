package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

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
// span was not started) does nothing. A Span must be ended exactly once;
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

// spanState is a started span and the attributes it records at End.
//
// The attributes wait here, in one allocation with the state, and go to
// the SDK in a single SetAttributes as the span ends: handed over at the
// start and then one by one, each span cost three more copies of them
// (the start options', the SDK's, and the SDK's again as its slice grew).
// Nothing reads a span's attributes before it ends: the proxy's samplers
// (ParentBased, TraceIDRatio, always on or off: OTEL_TRACES_SAMPLER offers
// no other) and its batch processor do not.
type spanState struct {
	s trace.Span
	// recording is s.IsRecording() at the start, which holds until End:
	// asking the SDK again takes the span's lock each time.
	recording bool

	mu         sync.Mutex
	outcomeSet bool
	ended      atomic.Bool // set under mu; read without it by IsRecording
	n          int
	attrs      [inlineAttrs]attribute.KeyValue
	more       []attribute.KeyValue // after attrs is full
}

// setLocked records kv, replacing an earlier value of its key (the last
// one wins, as with SetAttributes). It drops kv when the span has ended or
// is full. st.mu must be held.
func (st *spanState) setLocked(kv attribute.KeyValue) {
	if st.ended.Load() {
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
	}
}

// maxMoreAttrs bounds the attributes beyond inlineAttrs: no span of the
// proxy sets more than sixteen different keys.
const maxMoreAttrs = 4

// set is setLocked with the lock taken.
func (st *spanState) set(kv attribute.KeyValue) {
	st.mu.Lock()
	st.setLocked(kv)
	st.mu.Unlock()
}

// The start options of the two kinds of span, built once: a slice made
// for each Start would be an allocation, as the Tracer interface's
// variadic escapes.
var (
	serverStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	clientStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// serverSpanKey holds the server span's state in its request's ctx.
type serverSpanKey struct{}

// IsRecording reports whether the span records attributes: callers may
// skip work that only feeds a span.
func (s Span) IsRecording() bool { return s.st != nil && s.st.recording && !s.st.ended.Load() }

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
	st.s.SetStatus(codes.Error, errType)
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
	if !st.outcomeSet && outcome != "" && st.recording {
		st.setOutcomeLocked(outcome, rpcCode)
	}
	if !st.ended.Load() && st.n > 0 {
		st.s.SetAttributes(st.attrs[:st.n]...)
		if len(st.more) > 0 {
			st.s.SetAttributes(st.more...)
		}
	}
	st.ended.Store(true)
	st.mu.Unlock()
	st.s.End()
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
	st, _ := ctx.Value(serverSpanKey{}).(*spanState)
	return Span{st}
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
	ctx, span := t.tracer.Start(ctx, t.names.name(r.Method, r.Target), serverStart...)
	st := &spanState{s: span, recording: span.IsRecording()}
	if st.recording {
		st.add(semconv.McpMethodNameKey.String(r.Method))
		st.addTarget(r.Method, r.Target)
		if id := requestID(r.ID); id != "" {
			st.add(semconv.JSONRPCRequestID(id))
		}
		st.addCommon(r.SessionID, r.Protocol, r.Transport, r.Address, r.Port)
		if r.Agent != "" {
			st.add(AttrAgent.String(r.Agent))
		}
	}
	return context.WithValue(ctx, serverSpanKey{}, st), Span{st}
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
	ctx, span := t.tracer.Start(ctx, t.names.name(r.Method, target), clientStart...)
	st := &spanState{s: span, recording: span.IsRecording()}
	if st.recording {
		st.add(semconv.McpMethodNameKey.String(r.Method))
		st.addTarget(r.Method, target)
		if r.ID != "" {
			st.add(semconv.JSONRPCRequestID(r.ID))
		}
		st.addCommon(r.SessionID, r.Protocol, r.Transport, r.Address, r.Port)
		if r.Server != "" {
			st.add(AttrServer.String(r.Server))
		}
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
