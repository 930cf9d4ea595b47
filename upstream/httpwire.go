package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Streamable HTTP header names.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-ID"
)

// Timings of the Streamable HTTP wire.
const (
	// sseReconnectDelay is the wait before a stream is resumed or the GET
	// stream reopened when the server asked for none (an SSE retry field);
	// minSSEReconnectDelay is the least wait, whatever it asked for.
	sseReconnectDelay    = time.Second
	minSSEReconnectDelay = 10 * time.Millisecond
	// maxListenBackoff caps the wait between failed attempts to open the
	// GET stream (doubled from sseReconnectDelay per failure), and between
	// resumes of a request's stream that bring nothing new.
	maxListenBackoff = 30 * time.Second
	// endSessionTimeout bounds the DELETE that ends a session on Close.
	endSessionTimeout = 5 * time.Second
	// maxReplyAckBytes bounds what is read of a body the wire does not
	// need (the server's answer to a posted reply or notification: 202
	// with nothing, in practice): it is only drained, so that the
	// connection can be reused.
	maxReplyAckBytes = 64 << 10
)

// httpWire is the Streamable HTTP client of one session (MCP 2025-03-26 and
// later): each message is POSTed to the server URL; the answer to a request
// comes as a JSON body or in the POST's event stream, after the server's own
// notifications and requests for it; a stream cut off before the answer is
// resumed with a GET carrying Last-Event-ID. The session id the server
// gives in its initialize answer goes on every later request, and the
// negotiated protocol version once known (setProtocol). listen opens the
// GET stream, where the server sends what belongs to no request. Close ends
// the session with a DELETE.
type httpWire struct {
	url    string
	client *http.Client
	in     inbox
	// unreachable (nil: none) is told when a request could not reach the
	// server at all: it still could not connect after the client's
	// retries (a dial error), so the server is down, not slow.
	unreachable func(error)

	mu       sync.Mutex
	session  string
	version  string
	gone     bool // the server no longer knows the session: nothing more is sent
	closed   bool
	stopGET  context.CancelFunc
	getEnded chan struct{} // closed when the GET stream's loop returns; nil: never started
	// getTried is closed once the GET stream's first open has its answer
	// (or the loop returned without one); nil: never started.
	getTried     chan struct{}
	getTriedOnce sync.Once
}

var _ wire = (*httpWire)(nil)

// headers returns the session id and protocol version to send, and
// errSessionGone once the server forgot the session.
func (w *httpWire) headers() (session, version string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone {
		return "", "", errSessionGone
	}
	if w.closed {
		return "", "", errTransportClosed
	}
	return w.session, w.version, nil
}

func (w *httpWire) sessionID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.session
}

// setProtocol sets the protocol version sent from now on.
func (w *httpWire) sendsHeaders() bool { return true }
func (w *httpWire) setProtocol(v string) {
	w.mu.Lock()
	w.version = v
	w.mu.Unlock()
}

// resumable reports whether a cut event stream may be resumed: not in the
// 2026-07-28 era, which removed resumption (a broken stream loses its
// request).
func (w *httpWire) resumable() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !mcp.IsModernProtocol(w.version)
}

// forgotten reports an HTTP status that says the server does not know the
// session (or, without one, the endpoint): 404 or 410.
func forgotten(code int) bool { return code == http.StatusNotFound || code == http.StatusGone }

// forget marks session gone when it is still the wire's: the server no
// longer knows it, and nothing more is sent on it.
func (w *httpWire) forget(session string) {
	w.mu.Lock()
	if w.session == session {
		w.gone = true
	}
	w.mu.Unlock()
}

// replyTo is where the replies to one stream's requests go.
type replyTo struct {
	session, version string // "" = not sent
}

// send makes one HTTP request to the server URL with the session's headers
// (and extra, when not nil). A 404 or 410 to a POST that carried the
// session id marks the session gone and fails with errSessionGone; a 404
// to one without fails with errNotFound. Any other answer is returned (a
// GET's 404 means different things to its callers).
func (w *httpWire) send(ctx context.Context, method string, body []byte, accept string, extra http.Header) (*http.Response, replyTo, error) {
	session, version, err := w.headers()
	if err != nil {
		return nil, replyTo{}, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// The request gets a context of its own, ended before its body is
	// closed (cancelBody).
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, method, w.url, rd)
	if err != nil {
		cancel()
		return nil, replyTo{}, err
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if session != "" {
		req.Header.Set(headerSessionID, session)
	}
	if version != "" && req.Header.Get(headerProtocolVersion) == "" {
		req.Header.Set(headerProtocolVersion, version) // extra may set the request's own
	}
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() == nil && isDialError(err) && w.unreachable != nil {
			w.unreachable(err)
		}
		cancel()
		return nil, replyTo{}, err
	}
	resp.Body = cancelBody{ReadCloser: resp.Body, cancel: cancel}
	to := replyTo{session: session, version: version}
	if method == http.MethodPost && (forgotten(resp.StatusCode)) {
		if session == "" && resp.StatusCode == http.StatusGone {
			return nil, to, newStatusError(resp, nil)
		}
		drain(resp)
		if session == "" {
			return nil, to, errNotFound
		}
		w.forget(session)
		return nil, to, errSessionGone
	}
	if to.session == "" {
		// The initialize answer names the session: everything after
		// carries it.
		if id := resp.Header.Get(headerSessionID); id != "" && resp.StatusCode/100 == 2 {
			w.mu.Lock()
			closed := w.closed
			if w.session == "" && !closed {
				w.session = id
			}
			w.mu.Unlock()
			if closed {
				// Close ran while this request was out: it ends the
				// session the server just made, which nobody will use.
				drain(resp)
				w.endSession(id, version)
				return nil, to, errTransportClosed
			}
			to.session = id
		}
	}
	return resp, to, nil
}

func (w *httpWire) call(ctx context.Context, id, method string, params json.RawMessage, header http.Header) (json.RawMessage, *mcp.JSONRPCErrorDetails, error) {
	body, key := encodeRequest(id, method, params)
	resp, to, err := w.send(ctx, http.MethodPost, body, "application/json, text/event-stream", header)
	if err != nil {
		return nil, nil, err
	}
	r, err := w.answer(ctx, resp, to, key)
	if err == nil {
		err = r.err
	}
	if err != nil {
		return nil, nil, err
	}
	return r.result, r.rpcErr, nil
}

// answer reads the answer to the request with routing key key from resp,
// its POST's response, and closes the body.
func (w *httpWire) answer(ctx context.Context, resp *http.Response, to replyTo, key string) (rpcReply, error) {
	switch {
	case resp.StatusCode/100 != 2:
		return errorAnswer(resp, key)
	case isEventStream(resp.Header.Get("Content-Type")):
		return w.streamAnswer(ctx, resp.Body, to, key)
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		drain(resp)
		return rpcReply{}, fmt.Errorf("%w: HTTP %s without a response", ErrBadResponse, resp.Status)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rpcReply{}, err
	}
	body = bytes.TrimSpace(body)
	if !isJSON(resp.Header.Get("Content-Type")) {
		return rpcReply{}, fmt.Errorf("%w: content type %q", ErrBadResponse, resp.Header.Get("Content-Type"))
	}
	e, _, err := readMessage(body)
	switch {
	case err != nil:
		return rpcReply{}, fmt.Errorf("%w: invalid JSON: %w", ErrBadResponse, err)
	case e.Kind != rawjson.KindResponse:
		return rpcReply{}, fmt.Errorf("%w: not a JSON-RPC response", ErrBadResponse)
	case rawjson.IDKey(e.ID) != key:
		return rpcReply{}, fmt.Errorf("%w: the response is for another request", ErrBadResponse)
	}
	return replyOf(e, true), nil
}

// streamAnswer reads a request's event stream up to its answer, handling
// the server's notifications and requests on the way. A stream cut off
// before the answer is resumed (resume) when the server gave its events
// ids, for as long as ctx lasts: after the server's reconnection time, and
// twice as long after each resumed stream that brought no new event (at
// most maxListenBackoff). Otherwise, or when a resume is refused, the
// request fails with ErrConnectionLost: the server may have executed it,
// so it is not re-sent.
func (w *httpWire) streamAnswer(ctx context.Context, body io.ReadCloser, to replyTo, key string) (rpcReply, error) {
	r := newSSEReader(body)
	var idle time.Duration // the wait after a resume that brought nothing new
	for {
		seen := r.lastID
		reply, found, err := w.readStream(ctx, r, body, to, key)
		if found {
			return reply, nil
		}
		var tl *ResponseTooLargeError
		if ctx.Err() != nil || errors.As(err, &tl) {
			return rpcReply{}, err
		}
		if r.lastID == "" || !w.resumable() {
			return rpcReply{}, fmt.Errorf("%w: the server's event stream ended before the response: %w", ErrConnectionLost, err)
		}
		delay := r.reconnectDelay()
		if r.lastID == seen && idle > 0 {
			idle = min(2*idle, maxListenBackoff)
			delay = max(delay, idle)
		} else if r.lastID == seen {
			idle = delay
		} else {
			idle = 0
		}
		if body, err = w.resume(ctx, r, to, delay); err != nil {
			if ctx.Err() != nil {
				return rpcReply{}, ctx.Err()
			}
			return rpcReply{}, fmt.Errorf("%w: resume the server's event stream: %v", ErrConnectionLost, err)
		}
		r.reset(body)
	}
}

// readStream reads events from r (over body, which it closes: a body of
// send, whose reads end with ctx) until the answer to key (found; "" for
// the GET stream, which has none), the end of the stream or ctx.
func (w *httpWire) readStream(ctx context.Context, r *sseReader, body io.ReadCloser, to replyTo, key string) (rpcReply, bool, error) {
	defer body.Close()
	send := func(reply []byte) { w.in.reply(ctx, w.client, w.url, to, reply) } // one per stream, not per event
	for {
		ev, err := r.next()
		if err != nil {
			if ctx.Err() != nil {
				return rpcReply{}, false, ctx.Err()
			}
			return rpcReply{}, false, err
		}
		in := w.in.take(ctx, ev.data, send)
		if !in.response {
			continue
		}
		if reply, ok := replyFor(in, key); ok {
			return reply, true, nil
		}
		w.in.log.Debug().Msg("a response for another request in an event stream was dropped")
	}
}

// resume waits delay and reopens the stream r was reading with a GET
// carrying its last event id. A 404 or 410 there means the server forgot
// the session: the wire marks it gone (the next request renews it), but the
// error is not errSessionGone, since the request being resumed reached the
// server.
func (w *httpWire) resume(ctx context.Context, r *sseReader, to replyTo, delay time.Duration) (io.ReadCloser, error) {
	if err := sleep(ctx, delay); err != nil {
		return nil, err
	}
	h := http.Header{headerLastEventID: {r.lastID}}
	resp, _, err := w.send(ctx, http.MethodGet, nil, "text/event-stream", h)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !isEventStream(resp.Header.Get("Content-Type")) {
		if to.session != "" && (forgotten(resp.StatusCode)) {
			w.forget(to.session)
		}
		return nil, newStatusError(resp, nil)
	}
	return resp.Body, nil
}

func (w *httpWire) notify(ctx context.Context, method string, params json.RawMessage) error {
	resp, _, err := w.send(ctx, http.MethodPost, encodeNotification(method, params), "application/json, text/event-stream", nil)
	return accepted(resp, err)
}

// listen opens the GET stream on a goroutine of the session and keeps it
// open until Close: the server's notifications and requests that belong to
// no request come there. A stream that ends is reopened after the
// server's reconnection time, at least sseReconnectDelay (with
// Last-Event-ID when its events had ids); one that cannot be opened is
// tried again after a growing wait. A server that does not offer the
// stream (405, or 404 or 410 before it was ever open) is left alone; one
// that answers 404 or 410 once it was open forgot the session, which is
// marked gone: the next request renews it.
func (w *httpWire) listen() {
	w.mu.Lock()
	if w.closed || w.getEnded != nil {
		w.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(w.in.life)
	w.stopGET, w.getEnded, w.getTried = cancel, make(chan struct{}), make(chan struct{})
	ended := w.getEnded
	w.mu.Unlock()
	if !w.in.spawn(func() {
		defer close(ended)
		defer w.triedGET()
		w.listenLoop(ctx)
	}) {
		cancel()
		close(ended)
		w.triedGET()
	}
}

// triedGET marks the GET stream's first open as answered.
func (w *httpWire) triedGET() {
	w.getTriedOnce.Do(func() { close(w.getTried) })
}

// awaitGET waits, at most while ctx lasts, until the GET stream's first
// open was answered (open, refused or failed): the server can send on it
// from then on. It returns at once if listen was never called.
func (w *httpWire) awaitGET(ctx context.Context) {
	w.mu.Lock()
	tried := w.getTried
	w.mu.Unlock()
	if tried == nil {
		return
	}
	select {
	case <-tried:
	case <-ctx.Done():
	}
}

func (w *httpWire) listenLoop(ctx context.Context) {
	r := newSSEReader(http.NoBody)
	backoff := sseReconnectDelay
	opened := false
	for ctx.Err() == nil {
		var h http.Header
		if r.lastID != "" {
			h = http.Header{headerLastEventID: {r.lastID}}
		}
		resp, to, err := w.send(ctx, http.MethodGet, nil, "text/event-stream", h)
		w.triedGET()
		switch {
		case ctx.Err() != nil:
			if resp != nil {
				drain(resp)
			}
			return
		case errors.Is(err, errSessionGone), errors.Is(err, errTransportClosed):
			return
		case err != nil:
		case resp.StatusCode == http.StatusMethodNotAllowed,
			!opened && (forgotten(resp.StatusCode)):
			// A server without the stream should say 405; some say 404.
			drain(resp)
			w.in.log.Debug().Int("status", resp.StatusCode).Msg("the server offers no GET stream")
			return
		case forgotten(resp.StatusCode):
			// The stream was open on this session before: the server
			// forgot the session. The next request renews it.
			drain(resp)
			if to.session != "" {
				w.forget(to.session)
			}
			return
		case resp.StatusCode == http.StatusOK && isEventStream(resp.Header.Get("Content-Type")):
			opened = true
			r.reset(resp.Body)
			_, _, err = w.readStream(ctx, r, resp.Body, to, "")
			if ctx.Err() != nil {
				return
			}
			w.in.log.Debug().Err(safe(err)).Msg("the GET stream ended; reopening it")
			backoff = sseReconnectDelay
			// At least a second between two streams, whatever the server
			// asked for: a server that closes at once must not make a loop.
			if sleep(ctx, max(r.reconnectDelay(), sseReconnectDelay)) != nil {
				return
			}
			continue
		default:
			err = newStatusError(resp, nil)
		}
		w.in.log.Debug().Err(safe(err)).Dur("retry_in", backoff).Msg("open the GET stream")
		if sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, maxListenBackoff)
	}
}

// Close stops the GET stream and ends the session with the server (a
// DELETE, bounded by endSessionTimeout; a server that does not allow it
// answers 405, which is fine).
func (w *httpWire) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	session, version, gone := w.session, w.version, w.gone
	stop := w.stopGET
	w.closed = true
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	if session == "" || gone {
		return nil
	}
	return w.endSession(session, version)
}

// endSession sends the DELETE that ends session, bounded by
// endSessionTimeout (a server that does not allow it answers 405, which is
// fine).
func (w *httpWire) endSession(session, version string) error {
	ctx, cancel := context.WithTimeout(context.Background(), endSessionTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, w.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set(headerSessionID, session)
	if version != "" {
		req.Header.Set(headerProtocolVersion, version)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("end the HTTP session: %w", err)
	}
	drain(resp)
	return nil
}

// cancelBody is a response body that ends its request's context before it
// is closed: over HTTP/2 a Close can wait for a stalled connection, which
// the context ends.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}

// drain closes a body we do not need, reading it first when its length is
// known and at most maxReplyAckBytes, so that the connection can be
// reused. A body of unknown length (a stream the server may hold open) is
// closed unread: reading it could wait for as long as the server likes.
func drain(resp *http.Response) {
	if resp.ContentLength >= 0 && resp.ContentLength <= maxReplyAckBytes {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplyAckBytes))
	}
	_ = resp.Body.Close()
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// ctxWrites: an HTTP request ends with its context.
func (w *httpWire) ctxWrites() bool { return true }

// endsWithSession: its requests end with their contexts, which the session
// binds to its own.
func (w *httpWire) endsWithSession() bool { return false }
