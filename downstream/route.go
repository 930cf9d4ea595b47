package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
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

// methodTable maps each method the proxy serves to its handler.
func (p *Proxy) methodTable() map[string]handler {
	return map[string]handler{
		"initialize":               p.initialize,
		"ping":                     p.ping,
		"server/discover":          p.discover,
		"logging/setLevel":         p.setLevel,
		"tools/list":               p.listTools,
		"tools/call":               p.callTool,
		"resources/list":           p.listResources,
		"resources/templates/list": p.listTemplates,
		"resources/read":           p.readResource,
		"resources/subscribe":      p.subscribe,
		"resources/unsubscribe":    p.unsubscribe,
		"prompts/list":             p.listPrompts,
		"prompts/get":              p.getPrompt,
		"completion/complete":      p.complete,
		"subscriptions/listen":     p.listen,
	}
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
func (p *Proxy) recovery(next handler) handler {
	return func(ctx context.Context, r *request) (res json.RawMessage, werr *wireError) {
		defer func() {
			if v := recover(); v != nil {
				p.log.Error().Str("method", r.method).Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack())).Msg("request handler panicked")
				res, werr = nil, errorf(codeInternal, "internal error")
			}
		}()
		return next(ctx, r)
	}
}

// traceRequest gives each request a server span (docs/operations.md#traces) that continues
// the client's trace (its HTTP headers, or params._meta); with tracing off
// it is not in the chain at all.
func (p *Proxy) traceRequest(next handler) handler {
	t := p.opts.Tracer
	if t == nil {
		return next
	}
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
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
		if werr != nil && werr.input == nil {
			span.End("error", werr.Code)
		} else {
			span.End(tracing.OutcomeOK, 0)
		}
		return res, werr
	}
}

// observe counts every request by agent, method and outcome and logs the
// failed ones at debug.
func (p *Proxy) observe(next handler) handler {
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		start := time.Now()
		res, werr := next(ctx, r)
		outcome := "ok"
		if werr != nil && werr.input == nil {
			outcome = "error"
			if e := p.log.Debug(); e.Enabled() {
				e.Str("agent", r.sess.agent.Name).Str("method", r.method).Int("code", werr.Code).
					Str("error", werr.Message).Dur("duration", time.Since(start)).Msg("request failed")
			}
		}
		p.opts.Metrics.Request(r.sess.agent.Name, r.method, outcome)
		return res, werr
	}
}

// answer runs one request through the route and returns its response and
// the JSON-RPC error code the response carries (0 for a result).
func (p *Proxy) answer(ctx context.Context, r *request) (reply, int) {
	h := p.route[r.method]
	if h == nil {
		p.opts.Metrics.Request(r.sess.agent.Name, "unknown", "error")
		return whole(errorResponse(r.id, errorf(codeMethodNotFound, "Method not found: %s", truncate(r.method, 100)))), codeMethodNotFound
	}
	res, werr := h(withRequest(ctx, r), r)
	switch {
	case werr != nil && werr.input != nil:
		return response(r.id, "result", werr.input), 0
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
// its read loop. first, when not nil, is msgs[0] already parsed. In a
// JSON-RPC batch (batch), a request of the stateless protocol, which has
// no batches, is refused.
func (p *Proxy) receiveBatch(ctx context.Context, s *session, msgs [][]byte, first *rawjson.Message, batch bool, out stream) (answer func() []reply) {
	var replies []reply
	var runs []func() (reply, int)
	for i, msg := range msgs {
		var m rawjson.Message
		var err error
		if i == 0 && first != nil {
			m = *first
		} else {
			m, err = rawjson.ParseMessage(msg)
		}
		if batch && err == nil && m.Kind == rawjson.KindRequest {
			if v, _ := stringMember(metaOf(m.Params), metaProtocolVersion); isModern(v) {
				replies = append(replies, whole(errorResponse(m.ID, batchRefusal(truncate(v, 40)))))
				continue
			}
		}
		refusal, _, run := p.receiveParsed(ctx, s, m, err, out)
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
