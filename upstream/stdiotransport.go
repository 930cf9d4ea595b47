package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/internal/fdmode"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/rs/zerolog"
)

// lineReader yields a child's stdout one line at a time; see
// lineLimiter.ReadLine and Owned for the contract.
type lineReader interface {
	ReadLine() ([]byte, error)
	Owned() bool
	// TooLarge is the byte limit when the last line stands in for an
	// over-long response (lineLimiter.TooLarge), else 0.
	TooLarge() int64
}

// stdioTransport is the wire over a stdio child's streams: each line is
// read once, validated once, and routed by its envelope members alone. A response's result is handed to the caller as the bytes the child
// wrote (copied out of the line buffer unless the reader hands the line
// over: lineLimiter.Owned); it is never decoded.
type stdioTransport struct {
	lines lineReader
	stdin io.WriteCloser
	// rawStdin writes to stdin when it is in non-blocking mode (our end of
	// an os.Pipe): a write is first tried on it directly, once (under
	// writeSem, one at a time).
	rawStdin *fdmode.NowaitWriter
	log      zerolog.Logger

	writeSem chan struct{} // one line at a time on stdin (a slot, so waiting ends with ctx)

	// requests answers the child's requests (its handler and the write of
	// its reply), at most maxServerRequests at once; reply is how.
	requests requestServer
	reply    replier
	// stallTimeout is how long a write may make no progress before the
	// child counts as hung (stdinStallTimeout); onStall, if set, is told
	// once, after the transport closed.
	stallTimeout time.Duration
	onStall      func(error)
	stallOnce    sync.Once

	pending pendingCalls

	handlerMu sync.RWMutex
	onRawNote func(method string, params json.RawMessage)
	onRequest requestHandler
	ctx       context.Context // Start's, for incoming requests

	startOnce sync.Once
	done      chan struct{}
	doneOnce  sync.Once
	closeOnce sync.Once
	closeErr  error

	// ended is closed when the session that owns the transport dies (nil:
	// never), which may come before the transport is closed: a request
	// waiting to be written or for its answer then fails at once with
	// errSessionEnded. Requests watch it themselves, so that none needs a
	// context of its own bound to the session's.
	ended <-chan struct{}
}

var _ wire = (*stdioTransport)(nil)

// requestHandler answers one request of the server: it returns the complete
// reply (a JSON-RPC response echoing the request's id).
type requestHandler func(ctx context.Context, req serverRequest) []byte

// newStdioTransport is the transport over a child's stdout (lines already
// bounded) and stdin.
func newStdioTransport(stdout lineReader, stdin io.WriteCloser, log zerolog.Logger) *stdioTransport {
	t := &stdioTransport{
		lines:        stdout,
		stdin:        stdin,
		rawStdin:     fdmode.NewNowaitWriter(stdin),
		log:          log,
		writeSem:     make(chan struct{}, 1),
		requests:     newRequestServer(log),
		stallTimeout: stdinStallTimeout,
		onRequest:    noRequestHandler,
		ctx:          context.Background(),
		done:         make(chan struct{}),
	}
	t.reply = replier{
		answer:     t.answer,
		send:       t.respond,
		start:      func(fn func()) bool { go fn(); return true },
		inlinePing: true,
	}
	return t
}

// noRequestHandler answers the child's requests until setRequestHandler
// sets the session's (before Start, in production).
func noRequestHandler(_ context.Context, req serverRequest) []byte {
	return errorReply(req.id, mcp.METHOD_NOT_FOUND, "No request handler configured", nil)
}

// start starts reading stdout; the child's requests are answered with ctx.
// Later calls do nothing.
func (t *stdioTransport) start(ctx context.Context) {
	t.startOnce.Do(func() {
		t.handlerMu.Lock()
		t.ctx = ctx
		t.handlerMu.Unlock()
		go t.readLoop()
	})
}

// call sends the request (the params' bytes as they are, but for the line
// breaks between their tokens, which would tear the line: oneLine) and
// waits for its response, for ctx, for the end of stdout
// (errTransportClosed) or for the session's end (errSessionEnded). A
// response that is not JSON-RPC fails it with ErrBadResponse. The line is
// written as built and the response routed by its id's bytes.
func (t *stdioTransport) call(ctx context.Context, id, method string, params json.RawMessage, _ http.Header) (json.RawMessage, *mcp.JSONRPCErrorDetails, error) {
	select {
	case <-t.done:
		return nil, nil, errTransportClosed
	case <-t.ended:
		return nil, nil, errSessionEnded
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	default:
	}
	// A client's pretty-printed arguments, relayed as bytes, lose their
	// line breaks.
	b, key := encodeRequest(id, method, oneLine(params))
	r, err := t.roundTrip(ctx, key, b)
	if err == nil {
		err = r.err
	}
	if err != nil {
		return nil, nil, err
	}
	return r.result, r.rpcErr, nil
}

// roundTrip writes line, a request whose id has the routing key key, and
// waits for what its response brings.
func (t *stdioTransport) roundTrip(ctx context.Context, key string, line []byte) (rpcReply, error) {
	ch := t.pending.add(key)
	forget := func() { t.pending.forget(key) }
	if err := t.writeLine(ctx, line); err != nil {
		forget()
		return rpcReply{}, fmt.Errorf("write request: %w", err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-t.done:
		select { // a response may have come just before the end
		case r := <-ch:
			return r, nil
		default:
		}
		forget()
		return rpcReply{}, errTransportClosed
	case <-t.ended:
		forget()
		return rpcReply{}, errSessionEnded
	case <-ctx.Done():
		forget()
		return rpcReply{}, ctx.Err()
	}
}

// notify writes one notification.
func (t *stdioTransport) notify(ctx context.Context, method string, params json.RawMessage) error {
	select {
	case <-t.done:
		return errTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	if err := t.writeLine(ctx, encodeNotification(method, oneLine(params))); err != nil {
		return fmt.Errorf("write notification: %w", err)
	}
	return nil
}

// writeDeadliner is a stdin whose blocked write a deadline can end (our
// end of an os.Pipe is one).
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// ctxWrites reports whether a write to the child's stdin returns when its
// context ends even while the child is not reading: then callers need no
// goroutine of their own around call (see await).
func (t *stdioTransport) ctxWrites() bool {
	_, ok := t.stdin.(writeDeadliner)
	return ok
}

// writeLine writes b and a newline to the child's stdin, one line at a
// time. It returns when ctx ends, also while waiting for its turn or while
// the write is blocked. A write cut short after part of the line went out
// has torn the child's input, so stdin is closed, which ends the session as
// a lost child would. A write that makes no progress for stallTimeout (a
// child that stopped reading its stdin) closes the transport and reports
// the child as hung (onStall), whatever ctx says: every write of the
// transport is bounded, also the replies to the child's own requests.
func (t *stdioTransport) writeLine(ctx context.Context, b []byte) error {
	b = append(b, '\n')
	select {
	case t.writeSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.done:
		return errTransportClosed
	case <-t.ended:
		return errSessionEnded
	}
	defer func() { <-t.writeSem }()
	dl, ok := t.stdin.(writeDeadliner)
	if !ok {
		_, err := t.stdin.Write(b)
		return pipeGone(err)
	}
	// Most lines fit in the pipe at once: then the write needs no deadline
	// and no watch on ctx.
	written := t.rawStdin.TryWrite(b)
	if written == len(b) {
		return nil
	}
	cancelled := false
	var mu sync.Mutex // orders the deadline the ctx sets with the ones set below
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		cancelled = true
		_ = dl.SetWriteDeadline(time.Now())
	})
	defer stop()
	setDeadline := func() {
		mu.Lock()
		defer mu.Unlock()
		if !cancelled {
			_ = dl.SetWriteDeadline(time.Now().Add(t.stallTimeout))
		}
	}
	var err error
	for written < len(b) {
		setDeadline()
		var n int
		n, err = t.stdin.Write(b[written:])
		written += n
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil || n == 0 {
			break // done, failed, cancelled, or no byte taken for a whole stallTimeout
		}
		// Progress, then the deadline: the child reads, slowly. Go on.
	}
	if stop() {
		_ = dl.SetWriteDeadline(time.Time{})
	} else {
		mu.Lock() // the AfterFunc ran (or runs): let it finish, then clear
		_ = dl.SetWriteDeadline(time.Time{})
		mu.Unlock()
	}
	if written == len(b) {
		return nil
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil:
		t.stalled(written)
		return fmt.Errorf("%w: %w", errTransportClosed, errStdinStalled)
	case written > 0:
		t.log.Warn().Int("written", written).Int("bytes", len(b)).Msg("a write to the server's stdin was cut short; closing it")
		_ = t.Close()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		return ctx.Err()
	}
	return pipeGone(err)
}

// stalled closes the transport of a child that has taken no input for
// stallTimeout, and reports it (once) so that the session drops and
// reconnects.
func (t *stdioTransport) stalled(written int) {
	t.stallOnce.Do(func() {
		t.log.Warn().Dur("after", t.stallTimeout).Int("written", written).
			Msg("the server stopped reading its stdin; treating it as hung")
		_ = t.Close()
		if t.onStall != nil {
			t.onStall(errStdinStalled)
		}
	})
}

// pipeGone marks a write that failed because the child's stdin is gone (it
// exited or closed it) as the transport's end, so that callers wait for the
// session to say why (a child's exit status) instead of reporting the
// broken pipe.
func pipeGone(err error) error {
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("%w: %w", errTransportClosed, err)
	}
	return err
}

// setRawNotificationHandler sets the handler of the child's notifications,
// as their bytes; until it is set they are dropped. params is nil when the notification had none, else its own
// copy of the params object as the child wrote it.
func (t *stdioTransport) setRawNotificationHandler(fn func(method string, params json.RawMessage)) {
	t.handlerMu.Lock()
	t.onRawNote = fn
	t.handlerMu.Unlock()
}

// setRequestHandler sets the handler of the child's requests; until then
// they get method not found.
func (t *stdioTransport) setRequestHandler(fn requestHandler) {
	t.handlerMu.Lock()
	t.onRequest = fn
	t.handlerMu.Unlock()
}

// Close fails every request in flight and closes stdin. The child itself is
// the session's to stop.
func (t *stdioTransport) Close() error {
	t.finish()
	t.closeOnce.Do(func() {
		if err := t.stdin.Close(); err != nil {
			t.closeErr = fmt.Errorf("close stdin: %w", err)
		}
	})
	return t.closeErr
}

// sessionID is "": stdio has no session id.
func (t *stdioTransport) sessionID() string { return "" }

func (t *stdioTransport) sendsHeaders() bool { return false }
func (t *stdioTransport) setProtocol(string) {}

// endsWithSession: a request in flight fails once t.ended is closed.
func (t *stdioTransport) endsWithSession() bool { return t.ended != nil }

func (t *stdioTransport) finish() { t.doneOnce.Do(func() { close(t.done) }) }

// readLoop handles every line of stdout until it ends.
func (t *stdioTransport) readLoop() {
	defer t.finish()
	for {
		line, err := t.lines.ReadLine()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, fs.ErrClosed) {
				t.log.Warn().Err(safe(err)).Msg("read the server's stdout")
			}
			return
		}
		t.handleLine(line, t.lines.Owned())
	}
}

// handleLine routes one line: a response to its waiting request, a
// notification or a request to its handler. line is only valid during the
// call unless owned (the reader let go of it).
func (t *stdioTransport) handleLine(line []byte, owned bool) {
	line = trimLineEnd(line)
	if len(line) == 0 {
		return
	}
	e, fresh, err := readMessage(line)
	if err == nil && e.Kind == rawjson.KindResponse {
		if limit := t.lines.TooLarge(); limit > 0 {
			t.route(e.ID, rpcReply{err: &ResponseTooLargeError{Limit: limit}})
			return
		}
		t.deliver(e, owned || fresh)
		return
	}
	if err == nil && e.Kind == rawjson.KindNotification {
		t.deliverNote(e)
		return
	}
	if t.requests.take(inboundOf(e, err), t.reply) {
		return
	}
	switch {
	case err != nil:
		t.invalidLine(line, err)
	default:
		if e.ID != nil && !rawjson.IsNull(e.ID) && t.route(e.ID, rpcReply{err: fmt.Errorf("%w: %s", ErrBadResponse, e.Invalid)}) {
			return
		}
		t.log.Warn().Str("reason", e.Invalid).Msg("a stdout line of the server that is not JSON-RPC 2.0 was dropped")
	}
}

// deliverNote hands a notification to the raw handler as its bytes.
// Params that are not an object, or name a member twice, drop it.
func (t *stdioTransport) deliverNote(e rawjson.Message) {
	t.handlerMu.RLock()
	raw := t.onRawNote
	t.handlerMu.RUnlock()
	if raw == nil {
		return
	}
	params, ok := noteParams(e)
	if !ok {
		t.log.Debug().Str("method", e.Method).Msg("a notification from the server with params that are not one object dropped")
		return
	}
	raw(e.Method, params)
}

// deliver hands a response to the request waiting for it, if any: its
// result in the line when owned (the line is nobody else's), else copied.
func (t *stdioTransport) deliver(e rawjson.Message, owned bool) {
	t.route(e.ID, replyOf(e, owned))
}

// invalidLine handles a line that is not one valid JSON object: when its
// head names a response to a request in flight, that request fails at once
// with ErrBadResponse rather than waiting for its timeout; any other such
// line is dropped.
func (t *stdioTransport) invalidLine(line []byte, err error) {
	if raw := rawjson.ResponseID(line[:min(len(line), idScanBytes)]); raw != nil {
		if t.route(raw, rpcReply{err: fmt.Errorf("%w: invalid JSON: %w", ErrBadResponse, err)}) {
			return
		}
	}
	t.log.Warn().Err(safe(err)).Int("bytes", len(line)).Msg("a stdout line of the server that is not JSON-RPC was dropped")
}

// route gives resp to the request with the given id and reports whether
// one was waiting.
func (t *stdioTransport) route(id json.RawMessage, r rpcReply) bool {
	return t.pending.route(rawjson.IDKey(id), r)
}

// answer runs the request handler: off the read loop, or on it for a
// ping, which the handler answers at once (requestServer). So a child that
// floods requests and does not read the answers stalls on its own stdout
// (the read loop waits for its write) instead of growing the proxy, until
// the write's stall timeout drops it.
func (t *stdioTransport) answer(req serverRequest) []byte {
	t.handlerMu.RLock()
	fn, ctx := t.onRequest, t.ctx
	t.handlerMu.RUnlock()
	if err := ctx.Err(); err != nil {
		return errorReply(req.id, mcp.INTERNAL_ERROR, err.Error(), nil)
	}
	return fn(ctx, req)
}

// respond writes reply, a complete JSON-RPC response, as one line: as its
// bytes, without the line breaks between tokens it may have (a client's
// pretty-printed result), which would tear the child's input.
func (t *stdioTransport) respond(reply []byte) {
	if err := t.writeLine(context.Background(), oneLine(reply)); err != nil {
		t.log.Debug().Err(safe(err)).Msg("write a response to the server")
	}
}

// trimLineEnd drops the line's "\n" and any "\r" before it.
func trimLineEnd(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
