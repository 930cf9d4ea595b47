package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// cancelNotifyTimeout bounds sending notifications/cancelled upstream after
// a caller gave up on a request; it is best effort.
const cancelNotifyTimeout = 5 * time.Second

// RPCError is a JSON-RPC error the upstream answered a request with.
type RPCError struct {
	Code    int
	Message string
	// Data is the error's data member as the server wrote it; nil when
	// absent.
	Data json.RawMessage
}

// Error returns the code and message, sanitized.
func (e *RPCError) Error() string {
	return sanitize.Error(fmt.Sprintf("upstream error %d: %s", e.Code, e.Message))
}

// Request sends one JSON-RPC request upstream over the raw transport (ids
// "px-<n>") and returns the result bytes exactly as the upstream sent them.
// params must be a JSON object or empty. Without a deadline in ctx the
// request is bounded by the server's timeout.
//
// Without a live connection the request waits for one during the server's
// first connection and within reconnect_wait of a dropped connection, at
// most until the window (or Options.StartupDeadline) ends and its own
// deadline, and is then sent (wait.go); otherwise it is refused at once.
//
// Errors: a JSON-RPC error answer is an *RPCError; a request refused
// without being sent wraps a *DownError (matching ErrNotConnected) saying
// why and when the next attempt starts; a connection that dies while the
// request is in flight fails it at once with ErrConnectionLost (it is never
// re-sent); if ctx ends first, notifications/cancelled is sent upstream
// (when the request was sent) and ctx.Err() is returned wrapped. Every
// error text is sanitized.
//
// A Streamable HTTP server that answers 404 or 410 for the session refused
// the request without executing it: the session is re-initialized (once for
// all requests that met it) and the request re-sent once on the new
// session. If the re-initialization fails, or the re-sent request meets an
// expired session again, the connection is dropped (and reconnected on the
// schedule) and the error wraps ErrNotConnected and ErrSessionExpired.
func (c *Conn) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		// From the request's arrival: a wait for the connection counts.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.requestTimeout())
		defer cancel()
	}
	s := c.acquire()
	if s == nil {
		var err error
		if s, err = c.awaitSession(ctx, method, time.Now()); err != nil {
			return nil, err
		}
	}
	if s.modern && (method == string(mcp.MethodResourcesSubscribe) || method == string(mcp.MethodResourcesUnsubscribe)) {
		s.end()
		return c.subscribe(method, params) // listen.go
	}
	if caps, ok := s.sideCaps(ctx, method); ok {
		// Made for a client whose capabilities differ from the ones
		// the session declared: on a session declaring the client's.
		raw, sent, err := s.requestOnSide(ctx, caps, method, params)
		if sent {
			s.end()
			return raw, err
		}
	}
	raw, err := s.request(ctx, method, params)
	s.end() // a renewal retires s once its requests have ended
	if !errors.Is(err, ErrSessionExpired) {
		return raw, err
	}
	next, err := s.awaitRenewal(ctx)
	if err != nil {
		return nil, c.opError(method, err)
	}
	if !next.begin() {
		return nil, c.opError(method, expiredErr(next.deathErr()))
	}
	defer next.end()
	raw, err = next.request(ctx, method, params)
	if errors.Is(err, ErrSessionExpired) {
		next.die(fmt.Errorf("%w again right after re-initialize", ErrSessionExpired))
		return nil, c.opError(method, expiredErr(next.deathErr()))
	}
	return raw, err
}

// acquire returns the live session with a request registered on it (the
// caller ends it with end), or nil when there is no live session.
func (c *Conn) acquire() *session {
	for {
		s := c.current()
		if s == nil || s.ctx.Err() != nil {
			return nil
		}
		if s.begin() {
			return s
		}
		if c.current() == s {
			return nil // closing, and no successor yet
		}
		// Replaced and closed between the two looks: take its successor.
	}
}

// isObject reports whether raw is one valid JSON object (rawjson's scan:
// one pass, no allocation, no encoding/json on a request's way).
func isObject(raw json.RawMessage) bool {
	return rawjson.Object(raw) == nil
}

// Notify sends one notification upstream. params must be a JSON object or
// empty; its values are sent byte for byte. Without a deadline in ctx it is
// bounded by the server's timeout.
func (c *Conn) Notify(ctx context.Context, method string, params json.RawMessage) error {
	s := c.current()
	if s == nil {
		return c.opError(method, c.notConnected())
	}
	if err := checkNoteParams(params); err != nil {
		return c.opError(method, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		// A server that holds the answer to a notification's POST open
		// must not hold the caller.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.requestTimeout())
		defer cancel()
	}
	nctx, stop := s.bind(withMethod(ctx, method))
	defer stop()
	var err error
	if !s.tr.ctxWrites() {
		_, err = await(s, nctx, func() (struct{}, error) { return struct{}{}, s.tr.notify(nctx, method, params) })
	} else {
		err = s.tr.notify(nctx, method, params)
	}
	if err != nil {
		if s.sessionExpired(err) && ctx.Err() == nil {
			s.expire() // not re-sent: it would concern the old session
			return c.opError(method, expiredErr(ErrSessionExpired))
		}
		if s.ctx.Err() != nil {
			return c.opError(method, s.lost())
		}
		if ctx.Err() != nil {
			return c.opError(method, ctx.Err())
		}
		return c.opError(method, err)
	}
	return nil
}

// opError wraps err with the server and method; its text is sanitized and
// errors.Is/As still see err.
func (c *Conn) opError(method string, err error) error {
	return safe(fmt.Errorf("upstream %q: %s: %w", c.name, method, err))
}

// bind derives a ctx that also ends when the session dies.
func (s *session) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// lost is the error of a request whose session died under it.
func (s *session) lost() error {
	return fmt.Errorf("%w: %w", ErrConnectionLost, context.Cause(s.ctx))
}

// await runs send on a goroutine of the session and waits for it or for
// ctx. A stdio write to a child that stopped reading blocks regardless of
// ctx, and neither Request nor Notify may; the goroutine ends when the write
// does, at the latest when the session closes the child's stdin.
func await[T any](s *session, ctx context.Context, send func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	var zero T
	if !s.spawn(func() {
		v, err := send()
		ch <- result{v, err}
	}) {
		return zero, s.lost()
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// request is Request on this session; discovery uses it too. Each request
// has its own client span (trace.go) when tracing is on. Its result is the
// one place an upstream's results come back to the proxy's clients: one
// that is not a JSON object is an *InvalidResultError, whatever the method
// (the handshake and keepalive pings, which keep their results to
// themselves, do not take this way).
func (s *session) request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	id := "px-" + strconv.FormatUint(s.c.ids.Add(1), 10)
	if len(params) > 0 && !isObject(params) {
		return nil, s.c.opError(method, fmt.Errorf("%w: params must be a JSON object", ErrBadRequest))
	}
	if method == string(mcp.MethodToolsCall) && s.c.refusedTool(params) {
		return nil, s.c.opError(method, fmt.Errorf("%w: the tool's x-mcp-header declaration is invalid; it is not called", ErrBadRequest))
	}
	ctx, span, params := s.startSpan(ctx, method, id, params)
	raw, err := s.send(ctx, method, id, params)
	if v := s.retryVersion(err); v != "" {
		// -32022 offering a version of the stateless core: once at that
		// version (MCP 2026-07-28, basic: version negotiation).
		raw, err = s.sendAt(ctx, method, "px-"+strconv.FormatUint(s.c.ids.Add(1), 10), v, params)
	}
	if err == nil && s.modern && len(raw) > 0 && raw[0] == '{' {
		raw, err = s.fulfil(ctx, method, params, raw) // inputs.go
	}
	if err == nil && (len(raw) == 0 || raw[0] != '{') {
		raw, err = nil, newInvalidResultError(s.c.name, method, raw)
	}
	endSpan(span, method, raw, err)
	return raw, err
}

// send sends one request with id and waits for its answer.
func (s *session) send(ctx context.Context, method, id string, params json.RawMessage) (json.RawMessage, error) {
	return s.sendAt(ctx, method, id, s.protocol, params)
}

// sendAt is send; in the 2026-07-28 era the request declares version.
func (s *session) sendAt(ctx context.Context, method, id, version string, params json.RawMessage) (json.RawMessage, error) {
	var header http.Header
	if s.modern {
		p, h, err := s.modernize(ctx, method, version, params)
		if err != nil {
			return nil, s.c.opError(method, err)
		}
		params, header = p, h
	}

	var result json.RawMessage
	var rpcErr *mcp.JSONRPCErrorDetails
	var err error
	switch {
	case !s.tr.ctxWrites():
		// A write may block past ctx: on a goroutine of the session (see
		// await); the wire ends the request when the session dies.
		type answer struct {
			result json.RawMessage
			rpcErr *mcp.JSONRPCErrorDetails
		}
		var a answer
		a, err = await(s, ctx, func() (answer, error) {
			r, e, err := s.tr.call(ctx, id, method, params, header)
			return answer{r, e}, err
		})
		result, rpcErr = a.result, a.rpcErr
	case s.tr.endsWithSession():
		// The write ends with ctx, and the wire ends the request when the
		// session dies: it needs no context bound to the session, and no
		// goroutine.
		result, rpcErr, err = s.tr.call(ctx, id, method, params, header)
	default:
		// An HTTP request ends with its context, which must end when the
		// session dies.
		rctx, stop := s.bind(withMethod(ctx, method))
		defer stop()
		result, rpcErr, err = s.tr.call(rctx, id, method, params, header)
	}
	if err != nil {
		var tooLarge *ResponseTooLargeError
		switch {
		case errors.As(err, &tooLarge):
			return nil, s.c.opError(method, tooLarge)
		case isNeedsAuth(err):
			// Refused with 401 before it was executed; the session is
			// dying and the server waits for a login.
			return nil, s.c.opError(method, fmt.Errorf("%w: %w", ErrNotConnected, firstNeedsAuth(err)))
		case s.sessionExpired(err) && ctx.Err() == nil:
			// The server did not execute the request: the caller may
			// re-send it once the session is renewed.
			return nil, s.c.opError(method, ErrSessionExpired)
		case s.ctx.Err() != nil:
			return nil, s.c.opError(method, s.lost())
		case ctx.Err() != nil:
			if method != string(mcp.MethodInitialize) && method != string(mcp.MethodServerDiscover) {
				// The handshake's requests are never cancelled: nothing
				// may precede initialize, and a server that ignores the
				// discover probe has not been initialized.
				s.sendCancelled(ctx, id)
			}
			return nil, s.c.opError(method, ctx.Err())
		case s.proc != nil && errors.Is(err, errTransportClosed):
			// The child's stdout ended; its exit, or the grace after its
			// stdout closed, is about to say why (process.onEnd).
			waitClosed(s.dead, 2*stdoutEOFGrace)
			if s.ctx.Err() != nil {
				return nil, s.c.opError(method, s.lost())
			}
			return nil, s.c.opError(method, fmt.Errorf("%w: %w", ErrConnectionLost, err))
		default:
			return nil, s.c.opError(method, err)
		}
	}
	s.barrier(ctx)
	if e := rpcErr; e != nil {
		return nil, rpcErrorOf(e)
	}
	if result == nil {
		return nil, s.c.opError(method, fmt.Errorf("%w: neither result nor error", ErrBadResponse))
	}
	return result, nil
}

// rpcErrorOf is the *RPCError of a server's error answer; its data stays
// the bytes the server wrote.
func rpcErrorOf(e *mcp.JSONRPCErrorDetails) *RPCError {
	rpc := &RPCError{Code: e.Code, Message: e.Message}
	switch d := e.Data.(type) {
	case nil:
	case json.RawMessage:
		rpc.Data = d
	default:
		if data, err := json.Marshal(d); err == nil {
			rpc.Data = data
		}
	}
	return rpc
}

// sendCancelled tells the upstream, best effort and off the caller's path,
// that the caller gave up on request id.
func (s *session) sendCancelled(ctx context.Context, id string) {
	reason := "request cancelled"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "request timed out"
	}
	params, _ := json.Marshal(map[string]string{"requestId": id, "reason": reason})
	s.spawn(func() {
		nctx, cancel := context.WithTimeout(s.ctx, cancelNotifyTimeout)
		defer cancel()
		nctx = withMethod(nctx, string(mcp.MethodNotificationCancelled))
		if err := s.tr.notify(nctx, string(mcp.MethodNotificationCancelled), params); err != nil && s.ctx.Err() == nil {
			s.log.Debug().Err(safe(err)).Str("request", id).Msg("send notifications/cancelled")
		}
	})
}

// checkNoteParams checks the params of a notification to send: empty, or
// one JSON object whose _meta, if any, is an object too.
func checkNoteParams(params json.RawMessage) error {
	if len(params) == 0 {
		return nil
	}
	if !isObject(params) {
		return fmt.Errorf("%w: params must be a JSON object", ErrBadRequest)
	}
	if meta, ok, _ := rawjson.Get(params, "_meta"); ok && meta[0] != '{' && !rawjson.IsNull(meta) {
		return fmt.Errorf("%w: _meta must be a JSON object", ErrBadRequest)
	}
	return nil
}

// retryVersion is the version to send a request at once more after err: a
// -32022 answer of a 2026-07-28 server whose supported list has a version
// of the stateless core the proxy speaks; "" otherwise.
func (s *session) retryVersion(err error) string {
	if err == nil || !s.modern {
		return "" // before rpc is declared: errors.As moves it to the heap
	}
	return retryVersionOf(err)
}

// retryVersionOf is retryVersion for a failed request of the stateless
// core.
func retryVersionOf(err error) string {
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION {
		return ""
	}
	if v := mutualVersion(rpc); mcp.IsModernProtocol(v) {
		return v // once, even at the session's version
	}
	return ""
}

// refusedTool reports whether a tools/call's params name a tool left out of
// the catalog for an invalid x-mcp-header declaration.
func (c *Conn) refusedTool(params json.RawMessage) bool {
	bad := c.invalidTools.Load()
	if bad == nil || len(*bad) == 0 {
		return false
	}
	v, ok, _ := rawjson.Get(params, "name")
	if !ok {
		return false
	}
	name, err := rawjson.Unquote(v)
	return err == nil && (*bad)[name]
}
