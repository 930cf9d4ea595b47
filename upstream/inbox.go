package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/rs/zerolog"
)

// inbox takes the messages an http or sse server sends in its event streams
// and bodies that are not a caller's answer: its notifications go to the
// session's handler, its requests are answered (requestServer, through
// the session's answer) and the reply sent back by the wire.
type inbox struct {
	log      zerolog.Logger
	requests requestServer
	onNote   func(method string, params json.RawMessage)
	answer   requestHandler
	// spawn runs a request's answer off the stream's reader (the session's
	// spawn: it reports false once the session is closing).
	spawn func(fn func()) bool
	// life is the session's context: an answer ends with it, and so does
	// the post of its reply, which timeout (the server's request timeout)
	// bounds too.
	life    context.Context
	timeout time.Duration
}

// incoming is one message of the server as take read it.
type incoming struct {
	msg rawjson.Message
	// response: msg is a response, or a message with a response's id that
	// is not valid JSON-RPC (then bad says why); the caller matches its id.
	response bool
	bad      error
}

// take handles one message of the server. A request is answered with ctx
// (also ended when the session ends), its reply given to send; a
// notification goes to the handler; a response is returned for the caller
// to match. An event with no data is a stream's priming event (MCP
// 2025-11-25, Streamable HTTP: an event id and an empty data field, sent so
// that a client can resume) and is passed over in silence. Anything else is
// dropped with a warning.
func (b *inbox) take(ctx context.Context, data []byte, send func(reply []byte)) incoming {
	if len(bytes.TrimSpace(data)) == 0 {
		return incoming{}
	}
	e, _, err := readMessage(data)
	switch {
	case err == nil && e.Kind == rawjson.KindResponse:
		return incoming{msg: e, response: true}
	case err == nil && e.Kind == rawjson.KindNotification:
		if params, ok := noteParams(e); !ok {
			b.log.Debug().Str("method", e.Method).Msg("a notification from the server with params that are not one object dropped")
		} else if b.onNote != nil {
			b.onNote(e.Method, params)
		}
		return incoming{}
	}
	if b.requests.take(inboundOf(e, err), replier{
		answer: func(req serverRequest) []byte {
			actx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(b.life, cancel)()
			return b.answer(actx, req)
		},
		send:  send,
		start: b.spawn,
	}) {
		return incoming{}
	}
	if err != nil {
		if id := rawjson.ResponseID(data[:min(len(data), idScanBytes)]); id != nil {
			return incoming{msg: rawjson.Message{ID: id}, response: true, bad: fmt.Errorf("%w: invalid JSON: %w", ErrBadResponse, err)}
		}
		b.log.Warn().Err(safe(err)).Int("bytes", len(data)).Msg("a message of the server that is not JSON-RPC was dropped")
		return incoming{}
	}
	if e.ID != nil && !rawjson.IsNull(e.ID) {
		return incoming{msg: e, response: true, bad: fmt.Errorf("%w: %s", ErrBadResponse, e.Invalid)}
	}
	b.log.Warn().Str("reason", e.Invalid).Msg("a message of the server that is not JSON-RPC 2.0 was dropped")
	return incoming{}
}

// reply POSTs reply, the answer to a request of the server, to url with
// the stream's session id and protocol version (to), within ctx (the
// stream's: the request's or the session's) and the server's request
// timeout. A failure is logged: nobody else waits for it.
func (b *inbox) reply(ctx context.Context, client *http.Client, url string, to replyTo, reply []byte) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(reply))
	if err != nil {
		b.log.Warn().Err(safe(err)).Msg("a response to the server was not sent")
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if to.session != "" {
		req.Header.Set(headerSessionID, to.session)
	}
	if to.version != "" {
		req.Header.Set(headerProtocolVersion, to.version)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.log.Debug().Err(safe(err)).Msg("post a response to the server")
		return
	}
	drain(resp)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		b.log.Warn().Int("status", resp.StatusCode).Msg("the server refused a response to its request")
	}
}

// replyFor reads the answer in in for the request whose id has the
// routing key key; ok is false when in answers another request.
func replyFor(in incoming, key string) (rpcReply, bool) {
	if rawjson.IDKey(in.msg.ID) != key {
		return rpcReply{}, false
	}
	if in.bad != nil {
		return rpcReply{err: in.bad}, true
	}
	return replyOf(in.msg, false), true
}

// maxErrorBodyBytes bounds what is read of an HTTP error answer, for the
// JSON-RPC error it may carry.
const maxErrorBodyBytes = 64 << 10

// errorAnswer reads the body of a non-2xx answer to a request: a JSON-RPC
// error response for the request whose id has the routing key key is its
// reply (a server refuses a protocol version with 400 and one); anything
// else is a statusError. The body is drained and closed.
func errorAnswer(resp *http.Response, key string) (rpcReply, error) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	serr := newStatusError(resp, body)
	if key == "" || !isJSON(resp.Header.Get("Content-Type")) {
		return rpcReply{}, serr
	}
	e, _, err := readMessage(bytes.TrimSpace(body))
	if err != nil || e.Kind != rawjson.KindResponse || e.Error == nil || rawjson.IDKey(e.ID) != key {
		return rpcReply{}, serr
	}
	r := replyOf(e, true)
	if r.err != nil || r.rpcErr == nil {
		return rpcReply{}, serr
	}
	return r, nil
}
