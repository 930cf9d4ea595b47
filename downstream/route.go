package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/tracing"
)

// The route. Every message from every client takes it: a transport (stdio
// lines, HTTP POST bodies) frames the bytes and calls receive, which
// reads the envelope once (rawjson.ParseMessage; receiveMessage when the
// transport has read it already), hands responses to the
// proxy's questions waiting for them, notifications to their handler, and
// requests to the one method table below, through middleware applied once
// (recovery, metrics and logging, the protocol checks). What a tools/call
// does past the table is in toolcall.go.

// handler answers one request: its result's JSON, or the error to send.
type handler func(ctx context.Context, r *request) (json.RawMessage, *wireError)

// middleware wraps a handler; the chain is built once, in New.
type middleware func(handler) handler

// router is the route: it reads the messages the transports frame,
// answers requests through the method table behind the middleware, and
// runs notifications through the same middleware and their own table.
type router struct {
	*env
	requests map[string]handler // the method table, each behind the middleware
	notices  map[string]handler // the notifications' table, behind the same middleware
}

func newRouter(e *env) *router { return &router{env: e} }

// serve sets the tables the router answers from, wrapping every handler
// in the middleware chain, outermost first: recovery, the request's trace
// span, metrics and logging, the protocol era's checks, the 2026-07-28
// result decoration. The chain is the same for notifications, whose
// handlers return nothing (trace and metrics count requests only).
func (rt *router) serve(requests, notices map[string]handler) {
	chain := []middleware{rt.recovery, rt.traceRequest, rt.observe, eraCheck, rt.decorate}
	rt.requests, rt.notices = buildRoute(requests, chain...), buildRoute(notices, chain...)
}

// methodTable maps each method the proxy serves to its handler.
func methodTable(l *lifecycle, c *toolCalls, s *resourcesPrompts) map[string]handler {
	return map[string]handler{
		"initialize":               l.initialize,
		"ping":                     l.ping,
		"server/discover":          l.discover,
		"logging/setLevel":         l.setLevel,
		"tools/list":               c.listTools,
		"tools/call":               c.callTool,
		"resources/list":           s.listResources,
		"resources/templates/list": s.listTemplates,
		"resources/read":           s.surfaced(s.readResource),
		"resources/subscribe":      s.subscribe,
		"resources/unsubscribe":    s.unsubscribe,
		"prompts/list":             s.listPrompts,
		"prompts/get":              s.surfaced(s.getPrompt),
		"completion/complete":      s.complete,
		"subscriptions/listen":     s.listen,
		"tasks/get":                c.getTask,
		"tasks/result":             c.taskResult,
		"tasks/cancel":             c.cancelTask,
		"tasks/list":               c.listTasks,
	}
}

// notificationTable maps each client notification the proxy acts on to
// its handler. Unknown ones are ignored, as JSON-RPC asks.
func notificationTable(roots rootsWatcher) map[string]handler {
	return map[string]handler{
		"notifications/initialized": func(_ context.Context, r *request) (json.RawMessage, *wireError) {
			r.sess.markInitialized() // the proxy's requests to the client were waiting for it (session.ask)
			return nil, nil
		},
		"notifications/cancelled": func(_ context.Context, r *request) (json.RawMessage, *wireError) {
			if id, ok, _ := rawjson.Get(r.params, "requestId"); ok && !rawjson.IsNull(id) {
				r.sess.inflight.cancel(id)
			}
			return nil, nil
		},
		"notifications/roots/list_changed": func(_ context.Context, r *request) (json.RawMessage, *wireError) {
			roots.rootsChanged(r.sess)
			return nil, nil
		},
	}
}

// rootsWatcher passes a client's change of roots on to the upstreams.
type rootsWatcher interface {
	rootsChanged(s *session)
}

// buildRoute wraps every handler of the table in the middleware chain,
// outermost first.
func buildRoute(table map[string]handler, chain ...middleware) map[string]handler {
	out := make(map[string]handler, len(table))
	for name, h := range table {
		for i := len(chain) - 1; i >= 0; i-- {
			h = chain[i](h)
		}
		out[name] = h
	}
	return out
}

// recovery turns a handler's panic into an internal error, logged with its
// stack: one bad request never takes the proxy down.
func (rt *router) recovery(next handler) handler {
	return func(ctx context.Context, r *request) (res json.RawMessage, werr *wireError) {
		defer func() {
			if v := recover(); v != nil {
				rt.log.Error().Str("method", r.method).Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack())).Msg("request handler panicked")
				res, werr = nil, errorf(codeInternal, "internal error")
			}
		}()
		return next(ctx, r)
	}
}

// traceRequest gives each request a server span (docs/operations.md#traces) that continues
// the client's trace (its HTTP headers, or params._meta); with tracing off
// it is not in the chain at all.
func (rt *router) traceRequest(next handler) handler {
	t := rt.opts.Tracer
	if t == nil {
		return next
	}
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		if r.notification() {
			return next(ctx, r) // no span: a notification has no outcome
		}
		target := ""
		if r.method == "tools/call" || r.method == "prompts/get" {
			target, _ = stringMember(r.params, "name")
		}
		transport := tracing.TransportPipe
		if r.sess.transport == transportHTTP {
			transport = tracing.TransportTCP
		}
		ctx, span := t.StartServer(ctx, tracing.ServerRequest{Method: r.method, Target: target, ID: r.id, Params: r.params,
			Header: r.header, SessionID: r.sess.id, Protocol: r.version, Agent: r.sess.agent.Name, Transport: transport})
		res, werr := next(ctx, r)
		if werr != nil {
			span.End("error", werr.Code)
		} else {
			span.End(tracing.OutcomeOK, 0)
		}
		return res, werr
	}
}

// observe counts every request by agent, method and outcome and logs the
// failed ones at debug.
func (rt *router) observe(next handler) handler {
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		if r.notification() {
			return next(ctx, r) // not counted: a notification has no outcome
		}
		start := time.Now()
		res, werr := next(ctx, r)
		outcome := "ok"
		if werr != nil {
			outcome = "error"
			if e := rt.log.Debug(); e.Enabled() {
				e.Str("agent", r.sess.agent.Name).Str("method", r.method).Int("code", werr.Code).
					Str("error", werr.Message).Dur("duration", time.Since(start)).Msg("request failed")
			}
		}
		rt.opts.Metrics.Request(r.sess.agent.Name, r.method, outcome)
		return res, werr
	}
}

// call runs one request through the middleware to its handler.
func (rt *router) call(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	h := rt.requests[r.method]
	if h == nil {
		rt.opts.Metrics.Request(r.sess.agent.Name, "unknown", "error")
		return nil, errorf(codeMethodNotFound, "Method not found: %s", truncate(r.method, 100))
	}
	return h(ctx, r)
}

// answer runs one request through the route and returns its response and
// the JSON-RPC error code the response carries (0 for a result).
func (rt *router) answer(ctx context.Context, r *request) (reply, int) {
	res, werr := rt.call(ctx, r)
	switch {
	case werr != nil:
		return whole(errorResponse(r.id, werr)), werr.Code
	case len(res) == 0:
		return response(r.id, "result", []byte(`{}`)), 0
	}
	return response(r.id, "result", res), 0
}

// receiveBatch routes the messages of one stdio line or HTTP POST body in
// order (receive) and returns what answers them: the replies routing gave
// at once, and the requests' responses (runAll). The caller runs it off
// its read loop. When parsed is set, first is msgs[0] already parsed (a
// value: a pointer handed through the transports' interface would put it
// on the heap). In a JSON-RPC batch (batch), a request of the stateless
// protocol, which has no batches, is refused.
func (rt *router) receiveBatch(ctx context.Context, s *session, msgs [][]byte, first rawjson.Message, parsed, batch bool, out stream, in inbound) (answer func() []reply) {
	var replies []reply
	var runs []func() (reply, int)
	for i, msg := range msgs {
		var m rawjson.Message
		var err error
		if i == 0 && parsed {
			m = first
		} else {
			m, err = parseMessage(msg)
		}
		if batch && err == nil && m.Kind == rawjson.KindRequest {
			if v, _ := stringMember(metaOf(m.Params), metaProtocolVersion); isModern(v) {
				replies = append(replies, whole(errorResponse(m.ID, batchRefusal(truncate(v, 40)))))
				continue
			}
		}
		refusal, _, run := rt.receiveParsed(ctx, s, m, err, out, in)
		switch {
		case refusal != nil:
			replies = append(replies, whole(refusal))
		case run != nil:
			runs = append(runs, run)
		}
	}
	return func() []reply { return runAll(runs, replies) }
}

// runAll runs the answers of one batch's requests, concurrently when there
// are several, and returns every reply.
func runAll(runs []func() (reply, int), replies []reply) []reply {
	switch len(runs) {
	case 0:
		return replies
	case 1:
		resp, _ := runs[0]()
		return append(replies, resp)
	}
	out := make([]reply, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], _ = run()
		}()
	}
	wg.Wait()
	return append(replies, out...)
}

// truncate cuts s to n bytes for an error text.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// parseMessage reads one client message's envelope: the route's one read
// of it. A transport that must look at the envelope before it hands the
// message over (HTTP picks the protocol era and the session from the first
// message of a POST; stdio delivers responses and notifications in order
// on its read loop) reads it here and hands the result over parsed
// (receiveParsed, receiveMessage), so that no message is read twice.
func parseMessage(msg []byte) (rawjson.Message, error) { return rawjson.ParseMessage(msg) }

// receive routes one message of a client, a stdio line or one message of
// an HTTP POST, as its bytes: a message that is not JSON gets its error
// reply, the others take receiveMessage.
func (rt *router) receive(ctx context.Context, s *session, msg []byte, out stream) (refusal []byte, code int, run func() (reply, int)) {
	m, err := parseMessage(msg)
	return rt.receiveParsed(ctx, s, m, err, out, inbound{})
}

// inbound is what a transport hands over with a client's message besides
// its bytes. The zero value (stdio, a test) brings nothing.
type inbound struct {
	// header is the HTTP request's header, whose trace context the
	// request's span continues; nil on stdio.
	header http.Header
	// prepaid is what the POST's one tools/call took in the store with
	// its session's read (prepaid.go); nil: nothing.
	prepaid *prepaid
}

// receiveParsed is receive of a message already parsed into m, with err
// the parse's error.
func (rt *router) receiveParsed(ctx context.Context, s *session, m rawjson.Message, err error, out stream, in inbound) (refusal []byte, code int, run func() (reply, int)) {
	if err != nil {
		return refused(nil, parseError(err))
	}
	return rt.receiveMessage(ctx, s, m, out, in)
}

// receiveMessage routes one parsed message of a client. A response goes
// to the question it answers and a notification to its handler at once. A
// message that cannot be served gets its error reply, with code the
// JSON-RPC error code it carries. For a request it returns the work that
// answers it (the response and its error code, 0 for a result), which the
// caller runs off its read loop; out carries the messages that precede the
// response, and in is what the transport brought with the message (the
// request takes it over: its header, its prepaid limits). The request is registered
// before receiveMessage returns, so that a notifications/cancelled read
// right after it finds it.
func (rt *router) receiveMessage(ctx context.Context, s *session, m rawjson.Message, out stream, in inbound) (refusal []byte, code int, run func() (reply, int)) {
	switch m.Kind {
	case rawjson.KindResponse:
		if !s.asks.deliver(m) && !rt.cross.forwardAnswer(ctx, s, m) {
			rt.log.Debug().Str("agent", s.agent.Name).Msg("a response from the client answers no pending request; dropped")
		}
		return nil, 0, nil
	case rawjson.KindNotification:
		rt.notify(ctx, s, m, out)
		return nil, 0, nil
	case rawjson.KindInvalid:
		return refused(m.ID, errorf(codeInvalidRequest, "invalid request: %s", m.Invalid))
	}
	r, werr := rt.newRequest(s, m, out)
	if werr != nil {
		return refused(m.ID, werr)
	}
	r.header, r.prepaid = in.header, in.prepaid
	rctx, cancel := context.WithCancel(ctx)
	if werr := s.inflight.add(m.ID, cancel); werr != nil {
		cancel()
		return refused(m.ID, werr)
	}
	return nil, 0, func() (reply, int) {
		defer s.inflight.done(r.id)
		defer cancel()
		return rt.answer(rctx, r)
	}
}

// refused is receiveMessage's answer to a message it cannot serve: the
// error reply and its code, no work.
func refused(id json.RawMessage, werr *wireError) ([]byte, int, func() (reply, int)) {
	return errorResponse(id, werr), werr.Code, nil
}

// parseError is the error of a message that is not JSON (JSON-RPC's parse
// error, answered with id null).
func parseError(err error) *wireError {
	if errors.Is(err, rawjson.ErrDuplicateMember) {
		return errorf(codeInvalidRequest, "invalid request: a member name appears twice")
	}
	return errorf(codeParseError, "Parse error")
}

// splitBody reads a POST body or a stdio line: one message, or a batch (a
// JSON array of them, which 2025-03-26 allows).
func splitBody(body []byte) (msgs [][]byte, batch bool, werr *wireError) {
	t := bytes.TrimSpace(body)
	if len(t) == 0 {
		return nil, false, errorf(codeParseError, "Parse error: empty message")
	}
	if t[0] != '[' {
		return [][]byte{t}, false, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(t, &raw); err != nil {
		return nil, true, errorf(codeParseError, "Parse error")
	}
	if len(raw) == 0 {
		return nil, true, errorf(codeInvalidRequest, "invalid request: an empty batch")
	}
	msgs = make([][]byte, len(raw))
	for i, m := range raw {
		msgs[i] = m
	}
	return msgs, true, nil
}

// metaOf is params._meta, or nil.
func metaOf(params json.RawMessage) json.RawMessage {
	if len(params) == 0 || params[0] != '{' {
		return nil
	}
	meta, _, _ := rawjson.Get(params, "_meta")
	return meta
}

// batchVersion is the one protocol version that has JSON-RPC batches: MCP
// added them in 2025-03-26 and removed them in 2025-06-18.
const batchVersion = "2025-03-26"

// batchRefusal is the error that refuses a JSON-RPC batch from a client
// at protocol version ("" before one is negotiated), or nil when that
// version has batches.
func batchRefusal(version string) *wireError {
	switch {
	case version == batchVersion:
		return nil
	case version == "":
		return errorf(codeInvalidRequest, "JSON-RPC batches are not supported before a protocol version is negotiated "+
			"(MCP has them only in protocol version %s)", batchVersion)
	case version < batchVersion:
		return errorf(codeInvalidRequest, "JSON-RPC batches are not supported in MCP protocol version %s (added in %s)", truncate(version, 40), batchVersion)
	}
	return errorf(codeInvalidRequest, "JSON-RPC batches are not supported in MCP protocol version %s (removed in 2025-06-18)", truncate(version, 40))
}

// notUTF8 refuses a client message that is not valid UTF-8: it is not JSON
// text (RFC 8259 §8.1), so nothing in it is read or echoed, its id neither.
var notUTF8 = errorf(codeInvalidRequest, "invalid request: the message is not valid UTF-8, as JSON text must be (RFC 8259 section 8.1)")

// newRequest reads a request's protocol facts: its _meta, and whether it
// is a stateless 2026-07-28 request (then its capabilities come from its
// _meta, which must have them) or belongs to the session's handshake.
func (rt *router) newRequest(s *session, m rawjson.Message, out stream) (*request, *wireError) {
	r := &request{sess: s, id: m.ID, method: m.Method, params: m.Params, out: out}
	if rawjson.IsNull(m.ID) {
		return nil, errorf(codeInvalidRequest, "invalid request: the id must be a string or a number, not null")
	}
	if len(m.Params) > 0 && m.Params[0] == '{' {
		if err := rawjson.Unique(m.Params); err != nil {
			return nil, errorf(codeInvalidRequest, "invalid request: a member name appears twice in params")
		}
		if meta, ok, _ := rawjson.Get(m.Params, "_meta"); ok && meta[0] == '{' {
			if err := rawjson.Unique(meta); err != nil {
				return nil, errorf(codeInvalidRequest, "invalid request: a member name appears twice in params._meta")
			}
			r.meta = meta
		}
	}
	if v, _ := stringMember(r.meta, metaProtocolVersion); isModern(v) {
		caps, ok, _ := rawjson.Get(r.meta, metaClientCaps)
		if !ok || len(caps) == 0 || caps[0] != '{' {
			return nil, errorf(codeInvalidParams, "missing or invalid _meta field %s", metaClientCaps)
		}
		if !slices.Contains(protocolVersions, v) {
			return nil, unsupportedVersion(v)
		}
		r.modern, r.version, r.caps = true, v, parseCaps(caps)
		return r, nil
	}
	if c := s.state.Client(); c != nil {
		r.version, r.caps = c.version, c.caps
	}
	return r, nil
}

// unsupportedVersion is the error for a stateless request naming a
// version the proxy does not serve; its data lists the ones it does.
func unsupportedVersion(v string) *wireError {
	data, _ := json.Marshal(map[string]any{"supported": protocolVersions, "requested": v})
	return &wireError{Code: codeUnsupportedVersion, Data: data,
		Message: fmt.Sprintf("unsupported protocol version: %q (supported: [%s])", v, strings.Join(protocolVersions, " "))}
}

// eraCheck refuses methods that one protocol era has and the other has
// not: the stateless core removed initialize, ping, logging/setLevel and
// resource subscriptions; server/discover and subscriptions/listen exist
// only in it.
func eraCheck(next handler) handler {
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		switch r.method {
		case "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
			if r.modern {
				return nil, errorf(codeMethodNotFound, "%q was removed in protocol version %s", r.method, modernVersion)
			}
		case "server/discover", "subscriptions/listen":
			if !r.modern {
				return nil, errorf(codeMethodNotFound, "%q requires protocol version %s or later", r.method, modernVersion)
			}
		}
		return next(ctx, r)
	}
}

// cachedMethods are the methods whose stateless results say how long a
// client may cache them and who may share them (cachehints.go).
var cachedMethods = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true, "server/discover": true,
}

// ownResults are the methods whose results the proxy writes itself, not
// an upstream.
var ownResults = map[string]bool{
	"server/discover": true, "tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "subscriptions/listen": true,
}

// decorate adds what a 2026-07-28 client expects on every result: the
// result type ("complete", unless the handler set one), for the results
// the proxy writes itself the server's identity in _meta (an upstream's
// result keeps its own _meta as it was), and for lists and reads their
// cache hints (cachehints.go).
func (rt *router) decorate(next handler) handler {
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		res, werr := next(ctx, r)
		if !r.modern || r.decorated || werr != nil {
			return res, werr
		}
		return rt.decorateResult(r.method, res, rt.resultHint(r, res)), nil
	}
}

// resultHint is the cache hint of r's result res.
func (rt *router) resultHint(r *request, res json.RawMessage) cacheHint {
	switch {
	case r.method == "resources/read":
		return rt.readHint(r.sess, res)
	case listKinds[r.method].hint != nil:
		return rt.listHint(r.sess, r.method)
	}
	return cacheHint{}
}

// decorateResult is decorate's work on a result of method, with hint the
// cache hint it carries when method is cached.
func (rt *router) decorateResult(method string, res json.RawMessage, hint cacheHint) json.RawMessage {
	if len(res) == 0 || res[0] != '{' {
		res = json.RawMessage(`{}`)
	}
	// One read of the members and one copy: a list's result is the
	// proxy's largest (about 0.8 MB for 2,000 tools).
	ms, err := rawjson.Members(res)
	if err != nil {
		return res
	}
	var meta []byte
	hasType, inputRequired := false, false
	for _, m := range ms {
		switch {
		case m.Key == "_meta" && meta == nil:
			meta = res[m.ValueStart:m.ValueEnd]
		case m.Key == "resultType":
			hasType = true
			inputRequired = string(res[m.ValueStart:m.ValueEnd]) == `"input_required"` // not cacheable
		}
	}
	var set []rawjson.KV
	if ownResults[method] {
		if len(meta) == 0 || meta[0] != '{' {
			meta = []byte(`{}`)
		}
		if m, err := rawjson.Set(meta, metaServerInfo, rt.serverInfo()); err == nil {
			set = append(set, rawjson.KV{Key: "_meta", Value: m})
		}
	}
	if !hasType {
		set = append(set, rawjson.KV{Key: "resultType", Value: []byte(`"complete"`)})
	}
	if cachedMethods[method] && !inputRequired {
		set = append(set, hint.members()...)
	}
	if len(set) == 0 {
		return res
	}
	out, err := rawjson.SetMany(res, set...)
	if err != nil {
		return res
	}
	return out
}

// notify runs a client notification through the middleware to its
// handler, at once (a notifications/cancelled must find the request it
// names still running). Unknown ones are ignored, as JSON-RPC asks.
func (rt *router) notify(ctx context.Context, s *session, m rawjson.Message, out stream) {
	if h := rt.notices[m.Method]; h != nil {
		_, _ = h(ctx, &request{sess: s, method: m.Method, params: m.Params, out: out})
	}
}
