package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// sseWire is the client of a legacy HTTP+SSE server (MCP 2024-11-05): one
// GET event stream carries everything the server sends, the first event
// ("endpoint") names the URL the client POSTs its messages to, and the
// answers to requests come on the stream, matched by id. When the stream
// ends the connection is lost (onLost); the session reconnects.
type sseWire struct {
	url          *url.URL
	client       *http.Client
	in           inbox
	requireHTTPS bool // a CA is configured: the endpoint must be https too

	ready   chan struct{} // closed at the first endpoint event
	done    chan struct{} // closed when the stream has ended
	cancel  context.CancelFunc
	onLost  func(error)
	endOnce sync.Once
	pending pendingCalls

	mu       sync.Mutex
	endpoint *url.URL
	version  string // the negotiated protocol version, sent on POSTs once known
	closed   bool
	endErr   error // why the stream ended; set before done is closed
}

var _ wire = (*sseWire)(nil)

// startSSE opens the event stream of the server at rawURL and waits, at
// most wait and while ctx lasts, for its endpoint event. The stream lives
// on in.life (until Close); its end is reported to onLost, unless Close
// ended it.
func startSSE(ctx context.Context, rawURL string, client *http.Client, in inbox, requireHTTPS bool, wait time.Duration, onLost func(error)) (*sseWire, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	w := &sseWire{
		url: u, client: client, in: in, requireHTTPS: requireHTTPS, onLost: onLost,
		ready: make(chan struct{}), done: make(chan struct{}),
	}
	sctx, cancel := context.WithCancel(in.life)
	w.cancel = cancel
	// The connect's ctx bounds the wait for the stream's headers, and the
	// read of a refusal's body; a good stream then lives on the session's.
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, rawURL, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("open the SSE stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !isEventStream(resp.Header.Get("Content-Type")) {
		defer cancel() // after the body is read
		if resp.StatusCode == http.StatusOK {
			drain(resp)
			return nil, fmt.Errorf("open the SSE stream: content type %q, not text/event-stream", resp.Header.Get("Content-Type"))
		}
		return nil, fmt.Errorf("open the SSE stream: %w", newStatusError(resp, nil))
	}
	if !stop() { // the connect ended as the headers came
		drain(resp)
		return nil, fmt.Errorf("open the SSE stream: %w", ctx.Err())
	}
	if !in.spawn(func() { w.read(sctx, resp.Body) }) {
		drain(resp)
		cancel()
		return nil, errTransportClosed
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return w, nil
	case <-w.done:
		err = fmt.Errorf("the SSE stream ended before its endpoint event: %w", w.endErr)
	case <-t.C:
		err = fmt.Errorf("no endpoint event on the SSE stream within %s", wait)
	case <-ctx.Done():
		err = fmt.Errorf("wait for the SSE endpoint event: %w", ctx.Err())
	}
	_ = w.Close()
	return nil, err
}

// read reads the stream until it ends, then fails every request waiting
// and reports the loss.
func (w *sseWire) read(ctx context.Context, body io.ReadCloser) {
	defer body.Close() // a body of ctx's request: its reads end with ctx
	r := newSSEReader(body)
	post := w.post // one func value per stream, not per event
	var err error
	for {
		var ev sseEvent
		if ev, err = r.next(); err != nil {
			w.tooLarge(r, err)
			break
		}
		switch string(ev.typ) {
		case "endpoint":
			w.setEndpoint(string(bytes.TrimSpace(ev.data)))
		case "", "message":
			if in := w.in.take(ctx, ev.data, post); in.response {
				w.route(in)
			}
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the server closed it")
	}
	w.end(err)
}

// tooLarge fails the request whose answer was cut off for being longer
// than max_response_bytes with that error (docs/configuration.md#servers), when err is that and
// the head of the event names the request; the stream cannot go on after
// it, and the other requests fail as lost.
func (w *sseWire) tooLarge(r *sseReader, err error) {
	var tl *ResponseTooLargeError
	if !errors.As(err, &tl) {
		return
	}
	data := r.cutData()
	if id := rawjson.ResponseID(data[:min(len(data), idScanBytes)]); id != nil {
		w.pending.route(rawjson.IDKey(id), rpcReply{err: tl})
	}
}

// setEndpoint takes the endpoint event's URL (relative to the stream's):
// it must be on the stream's host, and https when a CA is configured
// (docs/configuration.md#servers). A bad first one ends the stream (the connect fails saying
// why); a bad later one is logged and ignored.
func (w *sseWire) setEndpoint(raw string) {
	ep, err := w.url.Parse(raw)
	switch {
	case err != nil:
		err = fmt.Errorf("SSE endpoint: not a URL: %w", err)
	case ep.Host != w.url.Host:
		err = fmt.Errorf("SSE endpoint: on another host (%s)", ep.Host)
	case w.requireHTTPS:
		if err = requireHTTPS(ep); err != nil {
			err = fmt.Errorf("SSE endpoint: %w", err)
		}
	}
	w.mu.Lock()
	first := w.endpoint == nil
	if err == nil {
		w.endpoint = ep
	}
	w.mu.Unlock()
	switch {
	case err != nil && first:
		w.end(err)
		w.cancel()
	case err != nil:
		w.in.log.Warn().Err(safe(err)).Msg("a later endpoint event of the SSE server was ignored")
	case first:
		close(w.ready)
	}
}

// route gives a response to the request waiting for it, if any.
func (w *sseWire) route(in incoming) {
	key := rawjson.IDKey(in.msg.ID)
	r, _ := replyFor(in, key)
	if !w.pending.route(key, r) {
		w.in.log.Debug().Msg("a response for no request in flight was dropped")
	}
}

// end records why the stream ended (the first reason wins), fails the
// requests waiting and, unless Close ended it or it ended before its
// endpoint event (startSSE reports that), reports the loss.
func (w *sseWire) end(err error) {
	w.endOnce.Do(func() {
		w.mu.Lock()
		w.endErr = err
		closed := w.closed
		w.mu.Unlock()
		close(w.done)
		select {
		case <-w.ready:
		default:
			return // still connecting: startSSE says why it failed
		}
		if !closed && w.onLost != nil {
			w.onLost(err)
		}
	})
}

// postMessage POSTs msg to the endpoint, with the extra headers when not
// nil, and returns the answer, whose body the caller closes.
func (w *sseWire) postMessage(ctx context.Context, msg []byte, extra http.Header) (*http.Response, error) {
	w.mu.Lock()
	ep, closed, version := w.endpoint, w.closed, w.version
	w.mu.Unlock()
	if closed {
		return nil, errTransportClosed
	}
	if ep == nil {
		return nil, errors.New("the SSE server sent no endpoint")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.String(), bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set(headerProtocolVersion, version)
	}
	return w.client.Do(req)
}

func (w *sseWire) call(ctx context.Context, id, method string, params json.RawMessage, header http.Header) (json.RawMessage, *mcp.JSONRPCErrorDetails, error) {
	msg, key := encodeRequest(id, method, params)
	ch := w.pending.add(key)
	forget := func() { w.pending.forget(key) }
	resp, err := w.postMessage(ctx, msg, header)
	if err != nil {
		forget()
		return nil, nil, err
	}
	if resp.StatusCode/100 != 2 {
		forget()
		r, err := errorAnswer(resp, key)
		if err != nil {
			return nil, nil, err
		}
		return r.result, r.rpcErr, r.err
	}
	drain(resp)
	select {
	case r := <-ch:
		return r.result, r.rpcErr, r.err
	case <-w.done:
		select { // an answer may have come just before the end
		case r := <-ch:
			return r.result, r.rpcErr, r.err
		default:
		}
		forget()
		return nil, nil, fmt.Errorf("%w: SSE stream lost: %w", ErrConnectionLost, w.endErr)
	case <-ctx.Done():
		forget()
		return nil, nil, ctx.Err()
	}
}

func (w *sseWire) notify(ctx context.Context, method string, params json.RawMessage) error {
	return accepted(w.postMessage(ctx, encodeNotification(method, params), nil))
}

// post sends reply, the answer to a request of the server, to the
// endpoint, within the server's request timeout and the session's life.
func (w *sseWire) post(reply []byte) {
	w.mu.Lock()
	ep, version := w.endpoint, w.version
	w.mu.Unlock()
	if ep == nil {
		w.in.log.Warn().Msg("a response to the server was not sent: no message endpoint yet")
		return
	}
	w.in.reply(w.in.life, w.client, ep.String(), replyTo{version: version}, reply)
}

// setProtocol sets the protocol version header of the POSTs from now on.
func (w *sseWire) sendsHeaders() bool { return true }
func (w *sseWire) setProtocol(v string) {
	w.mu.Lock()
	w.version = v
	w.mu.Unlock()
}

func (w *sseWire) sessionID() string { return "" }

// Close ends the stream; requests in flight fail.
func (w *sseWire) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	w.end(errTransportClosed)
	return nil
}

// ctxWrites: an HTTP request ends with its context.
func (w *sseWire) ctxWrites() bool { return true }

// endsWithSession: its requests end with their contexts, which the session
// binds to its own.
func (w *sseWire) endsWithSession() bool { return false }
