package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// wire is a session's connection to its server, one of three: a stdio
// child's streams (stdioTransport), a Streamable HTTP endpoint (httpWire)
// or a legacy SSE stream and its message endpoint (sseWire). Every message
// goes out as the bytes the session built and every answer comes back as
// the bytes the server wrote: nothing is decoded into typed structs on the
// way. The server's own messages are routed by the wire: its notifications
// to the session's notification handler, its requests to the session's
// answer (relay.go).
type wire interface {
	// call sends the request {id, method, params} (params left out when
	// empty; they must be one JSON object) and waits for its answer: the
	// result as the server wrote it, or the error member. header holds
	// extra HTTP headers for this request (nil: none; stdio ignores it).
	call(ctx context.Context, id, method string, params json.RawMessage, header http.Header) (json.RawMessage, *mcp.JSONRPCErrorDetails, error)
	// notify sends one notification; params as for call.
	notify(ctx context.Context, method string, params json.RawMessage) error
	// sessionID is the Streamable HTTP session id, "" for none.
	sessionID() string
	// ctxWrites reports whether call and notify return when their context
	// ends even while a write is blocked; a stdio child that stopped
	// reading can block a write otherwise, and the session then runs them
	// on a goroutine of its own (await).
	ctxWrites() bool
	// endsWithSession reports whether the wire fails its requests in
	// flight by itself when the session dies (stdio: stdioTransport.ended);
	// otherwise the session binds their contexts to its own.
	endsWithSession() bool
	// sendsHeaders reports whether call sends its header argument (the
	// HTTP wires; stdio has no headers): the 2026-07-28 era's per-request
	// headers are worked out only for a wire that sends them.
	sendsHeaders() bool
	// setProtocol sets the protocol version the HTTP wires send in their
	// MCP-Protocol-Version header from now on ("" for none); stdio has no
	// headers and ignores it.
	setProtocol(version string)
	// Close ends the connection, and a Streamable HTTP session with the
	// server. Requests in flight fail (over HTTP, through their contexts,
	// which end with the session's). Idempotent.
	Close() error
}

// Sentinels of the wires.
var (
	// errTransportClosed: the wire ended (the stdio child's stdout closed,
	// the wire was closed) before the request was answered.
	errTransportClosed = errors.New("transport closed")
	// errSessionGone: a Streamable HTTP server answered 404 or 410 to a
	// request that carried the session id (or another request of the
	// session met that answer first, and this one was not sent): it no
	// longer knows the session, and did not execute the request.
	errSessionGone = errors.New("the server no longer knows the HTTP session")
	// errNotFound: a Streamable HTTP server without sessions answered 404.
	errNotFound = errors.New("the server answered HTTP 404 Not Found")
)

// statusError is an HTTP answer of the server that is neither a JSON-RPC
// message nor one the wire expects.
type statusError struct {
	code   int
	status string // "404 Not Found"
	// body is the start of the answer's body (its reason, often), at most
	// maxStatusBodyBytes; error texts are sanitized where they leave the
	// package (opError, safe).
	body string
}

func (e *statusError) Error() string {
	if e.body == "" {
		return "the server answered HTTP " + e.status
	}
	return "the server answered HTTP " + e.status + ": " + e.body
}

// maxStatusBodyBytes is how much of an unexpected answer's body its
// statusError quotes.
const maxStatusBodyBytes = 512

// newStatusError is the statusError of resp, quoting the start of its body
// (body, when the caller read it already; else read here). The body is
// drained and closed.
func newStatusError(resp *http.Response, body []byte) *statusError {
	if body == nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, maxStatusBodyBytes))
	}
	drain(resp)
	text := strings.TrimSpace(strings.ToValidUTF8(string(body[:min(len(body), maxStatusBodyBytes)]), ""))
	return &statusError{code: resp.StatusCode, status: resp.Status, body: text}
}

// encodeRequest is the request {"jsonrpc":"2.0","id":"<id>","method":
// <method>,"params":<params>} (params left out when empty), in one
// allocation with room for a line end, and the routing key of its id
// (rawjson.IDKey). params are copied as they are.
func encodeRequest(id, method string, params json.RawMessage) (msg []byte, key string) {
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"method":,"params":}`)+len(id)+len(method)+len(params)+8)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	start := len(b)
	b = rawjson.AppendString(b, id)
	key = rawjson.IDKey(b[start:])
	b = append(b, `,"method":`...)
	b = rawjson.AppendString(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}'), key
}

// encodeNotification is the notification {"jsonrpc":"2.0","method":
// <method>,"params":<params>} (params left out when empty).
func encodeNotification(method string, params json.RawMessage) []byte {
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","method":,"params":}`)+len(method)+len(params)+8)
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = rawjson.AppendString(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// pendingCalls are the requests of a wire waiting for the answer its
// reader routes to them, by their ids' routing keys (rawjson.IDKey).
type pendingCalls struct {
	mu sync.Mutex
	m  map[string]chan rpcReply
}

// add registers a request; its answer comes on the returned channel.
func (p *pendingCalls) add(key string) chan rpcReply {
	ch := make(chan rpcReply, 1)
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]chan rpcReply{}
	}
	p.m[key] = ch
	p.mu.Unlock()
	return ch
}

// forget drops a request that stopped waiting.
func (p *pendingCalls) forget(key string) {
	p.mu.Lock()
	delete(p.m, key)
	p.mu.Unlock()
}

// route gives r to the request with the routing key key, and reports
// whether one was waiting; each request gets one answer.
func (p *pendingCalls) route(key string, r rpcReply) bool {
	p.mu.Lock()
	ch, ok := p.m[key]
	delete(p.m, key)
	p.mu.Unlock()
	if ok {
		ch <- r // buffered, and no longer in m: it gets one value
	}
	return ok
}

// accepted reads the answer to a posted notification: any 2xx is one;
// anything else fails with a statusError.
func accepted(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return newStatusError(resp, nil)
	}
	drain(resp)
	return nil
}

// readMessage reads one message of the server from the bytes it came in
// (a stdio line, an HTTP body, an event's data): the one way every message
// of an upstream enters the proxy. Text that is not valid UTF-8 is
// repaired first (rawjson.ValidUTF8: each ill-formed sequence becomes
// U+FFFD and nothing else changes), so that a server's broken bytes never
// reach a client, whose decoder may refuse the whole message; a valid
// message costs one utf8.Valid pass and stays byte for byte. fresh
// reports that the message's bytes are a new copy, nobody else's.
func readMessage(msg []byte) (m rawjson.Message, fresh bool, err error) {
	msg, fresh = rawjson.ValidUTF8(msg)
	m, err = rawjson.ParseMessage(msg)
	return m, fresh, err
}

// rpcReply is what a request gets: its response's result or error member,
// or why no response can be read (err).
type rpcReply struct {
	result json.RawMessage
	rpcErr *mcp.JSONRPCErrorDetails
	err    error
}

// replyOf reads the response e. Only an error member is decoded; the result
// is passed on as it is: in the message's own buffer when owned (nobody else
// will use it), else copied.
func replyOf(e rawjson.Message, owned bool) rpcReply {
	var r rpcReply
	if e.Error != nil && !rawjson.IsNull(e.Error) {
		// data stays its bytes (a json.RawMessage in Data's `any`), which
		// session.send passes on as they are.
		var d struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(e.Error, &d); err != nil {
			r.err = fmt.Errorf("%w: undecodable error member: %w", ErrBadResponse, err)
		} else {
			r.rpcErr = &mcp.JSONRPCErrorDetails{Code: d.Code, Message: d.Message}
			if d.Data != nil {
				r.rpcErr.Data = d.Data // its own copy: Unmarshal copies a RawMessage
			}
		}
	}
	switch {
	case e.Result == nil || r.err != nil:
	case owned:
		r.result = e.Result[:len(e.Result):len(e.Result)] // full: an append copies
	default:
		r.result = append(json.RawMessage(nil), e.Result...)
	}
	return r
}

// noteParams returns a notification's params for the session's handler:
// nil when it had none, else its own copy of the params object as the
// server wrote it (without line breaks between tokens). ok is false for
// params that are not one object or name a member twice: the notification
// is dropped.
func noteParams(e rawjson.Message) (params json.RawMessage, ok bool) {
	if e.Params == nil {
		return nil, true
	}
	if e.Params[0] != '{' || rawjson.Unique(e.Params) != nil {
		return nil, false
	}
	return append(json.RawMessage(nil), oneLine(e.Params)...), true
}
