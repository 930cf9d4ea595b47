package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// The tool fast path. A tools/list, and on stdio a tools/call, of a session
// that completed the initialize handshake is answered by the wire layer
// itself instead of passing mcp-go: mcp-go would decode the whole request
// into its types (the arguments included) only for the proxy to forward the
// client's bytes, which was about a third of the proxy's CPU per call.
//
// What stays with mcp-go: requests of the stateless 2026-07-28 protocol
// (their multi round-trips and result types are mcp-go's), requests before
// initialize, and tools/call over HTTP, whose mid-call server requests
// (relayed sampling, approval elicitation) mcp-go routes into the POST's
// own stream.

// maxDirectCalls bounds the tool calls of one stdio session answered at
// once. A call beyond it is refused at once rather than queued, so the read
// loop never blocks: it must stay free to read the client's answers to the
// server requests (elicitation, sampling) that running calls wait on.
const maxDirectCalls = 1024

// directCalls tracks the fast-path calls of one stdio connection, so that
// the client's notifications/cancelled reaches them.
type directCalls struct {
	mu     sync.Mutex
	cancel map[string]context.CancelFunc // by exactIDKey of the request id
}

// exactIDKey is a request id as a map key: a string by its value, a number
// by its spelling, so that integers beyond float64 precision stay apart
// (idKey merges them, as mcp-go's re-encoding does).
func exactIDKey(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	}
	return "n:" + string(raw)
}

func (d *directCalls) add(id string, cancel context.CancelFunc) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.cancel = map[string]context.CancelFunc{}
	}
	if _, dup := d.cancel[id]; dup || len(d.cancel) >= maxDirectCalls {
		return false
	}
	d.cancel[id] = cancel
	return true
}

func (d *directCalls) done(id string) {
	d.mu.Lock()
	delete(d.cancel, id)
	d.mu.Unlock()
}

func (d *directCalls) inFlight() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.cancel) > 0
}

// cancelled handles a client's notifications/cancelled: the named fast-path
// call's context ends, which cancels its upstream request (and sends the
// upstream its own notifications/cancelled). It reports whether msg was
// such a notification for one of them.
func (d *directCalls) cancelled(env envelope) bool {
	if env.Method != string(mcp.MethodNotificationCancelled) || len(env.ID) > 0 || len(env.Params) == 0 {
		return false
	}
	rid, ok, err := rawjson.Get(env.Params, "requestId")
	if err != nil || !ok {
		return false
	}
	d.mu.Lock()
	cancel := d.cancel[exactIDKey(rid)]
	d.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	return true
}

// initializedSession returns the mcp-go session of st when it completed
// the initialize handshake, else nil.
func initializedSession(st *sessionState) server.ClientSession {
	if st == nil {
		return nil
	}
	if sess := st.session(); sess != nil && sess.Initialized() {
		return sess
	}
	return nil
}

// modernParams reports whether request params carry the _meta of the
// stateless 2026-07-28 protocol.
func modernParams(params json.RawMessage) bool {
	if len(params) == 0 || params[0] != '{' {
		return false
	}
	meta, ok, _ := rawjson.Get(params, "_meta")
	return ok && isModernMeta(meta)
}

// fastLists reports whether the wire layer answers a tools/list itself: on
// stdio for an initialized session, over HTTP for a request of a session
// (answerDirect checks the session id as mcp-go would), never for the
// stateless 2026-07-28 protocol.
func (pd *pending) fastLists(st *sessionState, params json.RawMessage) bool {
	if pd.fastCalls && initializedSession(st) == nil {
		return false
	}
	return st != nil && !modernParams(params)
}

// directList answers a tools/list from the catalog's bytes, after the
// startup wait every tools/list gets (SPEC §3).
func (pd *pending) directList(env envelope, st *sessionState) func(ctx context.Context) []byte {
	p := pd.p
	return func(ctx context.Context) []byte {
		p.waitStartup(ctx)
		p.opts.Metrics.Request(st.agent.Name, env.Method, "ok")
		tools := p.listFor(st)
		out := make([]byte, 0, len(tools)+len(env.ID)+48)
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, env.ID...)
		out = append(out, `,"result":{"tools":`...)
		out = append(out, tools...)
		return append(out, "}}"...)
	}
}

// callRequest is the part of tools/call params the fast path reads: raw
// sub-slices of the request, never decoded beyond the name.
type callRequest struct {
	name string
	args json.RawMessage
	meta json.RawMessage
}

// readCallParams reads a tools/call's params. A request mcp-go would refuse
// as invalid params gets the same code with a reason.
func readCallParams(params json.RawMessage) (callRequest, *wireError) {
	var c callRequest
	if len(params) == 0 || params[0] != '{' {
		return c, &wireError{Code: codeInvalidParams, Message: "invalid params: tools/call needs a params object"}
	}
	ms, err := rawjson.Members(params)
	if err != nil {
		return c, &wireError{Code: codeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	named := false
	for _, m := range ms {
		v := params[m.ValueStart:m.ValueEnd]
		switch m.Key {
		case "name":
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &c.name) != nil {
				return c, &wireError{Code: codeInvalidParams, Message: "invalid params: the tool name must be a string"}
			}
			named = true
		case "arguments":
			c.args = v
		case "_meta":
			if string(v) != "null" {
				c.meta = v
			}
		}
	}
	if !named {
		return c, &wireError{Code: codeInvalidParams, Message: "invalid params: tools/call needs a tool name"}
	}
	if len(c.args) > 0 && c.args[0] != '{' && string(c.args) != "null" {
		return c, &wireError{Code: codeInvalidParams, Message: "invalid params: arguments must be an object"}
	}
	if len(c.meta) > 0 && c.meta[0] != '{' {
		return c, &wireError{Code: codeInvalidParams, Message: "invalid params: _meta must be an object"}
	}
	return c, nil
}

// directCall answers one tools/call on stdio. It runs on the read loop:
// the call is registered there, before the loop reads the next line, so a
// notifications/cancelled right behind it finds it (and of two requests
// with one id in flight the first is the one that runs). The returned
// function runs the call on a worker, under pd.callCtx, which outlives a
// shutdown signal (in-flight calls finish, SPEC §3).
func (pd *pending) directCall(env envelope, st *sessionState, sess server.ClientSession, req callRequest, werr *wireError) func(ctx context.Context) []byte {
	p := pd.p
	id := env.ID
	key := exactIDKey(id)
	base := pd.callCtx
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(p.mcp.WithContext(base, sess))
	if !pd.calls.add(key, cancel) {
		cancel()
		return func(context.Context) []byte {
			p.opts.Metrics.Request(st.agent.Name, env.Method, "error")
			return errorResponse(id, &wireError{Code: codeServerError,
				Message: fmt.Sprintf("too many tool calls in flight on this session (at most %d, or a repeated request id)", maxDirectCalls)})
		}
	}
	return func(context.Context) (out []byte) {
		defer pd.calls.done(key)
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				p.log.Error().Str("panic", fmt.Sprint(r)).Msg("tool call handler panicked")
				out = errorResponse(id, &wireError{Code: codeInternal, Message: "internal error"})
			}
		}()
		werr := werr // this run's own outcome
		if werr == nil {
			p.awaitTool(ctx, req.name)
			if pd.direct != nil {
				ctx = context.WithValue(ctx, directKey{}, pd.direct)
			}
			var result json.RawMessage
			// No input request comes back: only 2026-07-28 requests are
			// asked through round trips, and they do not take this path.
			result, werr = p.forwardCall(ctx, st, req.name, req.args, req.meta, linkSupported(ctx))
			if werr == nil {
				p.opts.Metrics.Request(st.agent.Name, env.Method, "ok")
				return response(id, "result", result)
			}
		}
		p.opts.Metrics.Request(st.agent.Name, env.Method, "error")
		return errorResponse(id, werr)
	}
}

// awaitTool makes sure a tool name unknown to the catalog is not unknown
// only because the catalog lags: while upstreams are still starting it
// waits for them (a host calling a tool it remembers), and otherwise it
// brings the catalog up to the upstreams' latest snapshots (an upstream's
// readiness is signalled before its snapshot reaches Refresh). Refresh is
// cheap when nothing changed.
func (p *Proxy) awaitTool(ctx context.Context, name string) {
	if _, known := p.Catalog().Lookup(name); known {
		return
	}
	if p.startupPending() {
		p.waitStartup(ctx) // ends with a Refresh
		return
	}
	p.Refresh()
}

func errorResponse(id json.RawMessage, werr *wireError) []byte {
	b, _ := json.Marshal(werr)
	return response(id, "error", b)
}
