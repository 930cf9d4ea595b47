package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// Requests of an upstream to the proxy (sampling/createMessage,
// elicitation/create, roots/list, ping) are read once, by
// readServerRequest, from the bytes the wire received: a stdio line
// (stdiotransport.go) or the data of an SSE event (inbox.go), never
// decoded into a typed request, whose params would be an `any` that
// re-sorts keys, rounds integers beyond 2^53, escapes '<' and collapses a
// member named twice. The params reach Options.OnRequest as they came, and the
// client's result goes back to the upstream as its bytes (session.answer).

// Bounds on the requests an upstream sends the proxy (sampling, elicitation,
// roots, ping): a server that floods them, or stops reading the answers,
// must not grow the proxy (docs/protocol.md#requests-from-servers).
const (
	// maxServerRequests is how many requests of one upstream session are
	// answered at once; more is refused at once with tooManyServerRequests.
	// It is far above what servers send per call (one elicitation or
	// sampling request at a time), times the calls a busy proxy has in
	// flight on one server.
	maxServerRequests = 64
	// stdinStallTimeout is how long a write to a stdio child's stdin may
	// take no byte before the child counts as hung and the connection is
	// dropped and reconnected: the keepalive ping gives an answer as long
	// (maxPingTimeout).
	stdinStallTimeout = maxPingTimeout
)

// tooManyServerRequests is the error message of a request refused by
// maxServerRequests.
const tooManyServerRequests = "too many requests in flight from this server; try again later"

// serverRequest is one request of the upstream to the proxy, as the bytes it
// came in. It owns its slices (they are copies of the transport's buffer).
type serverRequest struct {
	// id is the id's JSON text, echoed byte for byte in the reply.
	id json.RawMessage
	// method is the decoded method name.
	method string
	// params is the params member's value as sent, nil when absent.
	params json.RawMessage
}

// inbound is what readServerRequest makes of one message of the upstream.
// Exactly one field is set, or none: then the message is not a request to
// the proxy (a response, a notification, or not JSON at all), and the
// transport handles it as it would without this path.
type inbound struct {
	// req is a request to answer.
	req *serverRequest
	// refusal is the complete error response to a request that is refused
	// as it stands (a member named twice, an invalid envelope), id null when
	// the request's own id cannot be told.
	refusal []byte
	// drop says why a message is neither answered nor passed on: a
	// notification (nobody to answer) that names a member twice.
	drop string
}

// readServerRequest reads msg, one JSON-RPC message of the upstream, for a
// request to the proxy. A message naming a member twice, in its envelope,
// its params or its params._meta, is never answered as if one copy were
// meant: every reader along the way (the proxy, the client's decoder) would
// pick its own. Such a request gets an invalid-request error (-32600), as the
// proxy's own clients get for theirs, and such a notification is dropped.
func readServerRequest(msg []byte) inbound {
	m, _, err := readMessage(msg)
	return inboundOf(m, err)
}

// inboundOf is readServerRequest for a message already parsed: m and err
// are what rawjson.ParseMessage returned for it.
func inboundOf(m rawjson.Message, err error) inbound {
	if err != nil && !errors.Is(err, rawjson.ErrDuplicateMember) {
		return inbound{} // not JSON: the transport's to report
	}
	switch {
	case m.Kind == rawjson.KindRequest:
	case m.Kind != rawjson.KindInvalid, !m.HasMethod:
		return inbound{} // a response or a notification, or an invalid response: the transport's
	case !m.HasID:
		return inbound{drop: "an invalid notification: " + m.Invalid}
	default:
		// m.ID is nil when the id is not an id, or named twice: the error
		// goes with id null.
		return inbound{refusal: errorReply(m.ID, mcp.INVALID_REQUEST, "invalid request: "+m.Invalid, nil)}
	}
	if rawjson.IsNull(m.ID) {
		return inbound{refusal: errorReply(nil, mcp.INVALID_REQUEST, "invalid request: the id must be a string or a number, not null", nil)}
	}
	if len(m.Params) > 0 && m.Params[0] == '{' {
		if rawjson.Unique(m.Params) != nil {
			return inbound{refusal: errorReply(m.ID, mcp.INVALID_REQUEST, "invalid request: a member name appears twice in params", nil)}
		}
		if meta, ok, _ := rawjson.Get(m.Params, "_meta"); ok && meta[0] == '{' && rawjson.Unique(meta) != nil {
			return inbound{refusal: errorReply(m.ID, mcp.INVALID_REQUEST, "invalid request: a member name appears twice in params._meta", nil)}
		}
	}
	req := &serverRequest{id: bytes.Clone(m.ID), method: m.Method}
	if m.Params != nil {
		req.params = bytes.Clone(m.Params)
	}
	return inbound{req: req}
}

// requestServer answers the requests of one upstream to the proxy, for
// either transport (stdio lines, event streams): a request readServerRequest
// took is answered off the transport's reader, with at most
// maxServerRequests in flight; a request beyond them, and one refused as it
// stands, is answered at once on the reader, which waits for that write. So
// a server that floods requests and does not read the answers stalls its own
// stream instead of growing the proxy.
type requestServer struct {
	slots chan struct{} // one per request being answered
	log   zerolog.Logger
}

func newRequestServer(log zerolog.Logger) requestServer {
	return requestServer{slots: make(chan struct{}, maxServerRequests), log: log}
}

// replier is how one transport answers the server's requests.
type replier struct {
	// answer returns the reply to req; it may wait (for a client).
	answer func(req serverRequest) []byte
	// send writes one reply to the server.
	send func(reply []byte)
	// start runs fn off the reader, or reports false (the session is
	// closing: nobody is left to answer).
	start func(fn func()) bool
	// inlinePing: a ping, which answer answers at once, is answered on the
	// reader, without a goroutine or a slot.
	inlinePing bool
}

// take acts on in, what readServerRequest made of one message of the
// server, and reports whether it was for the proxy (a request, answered or
// refused, or a message dropped); false leaves the message to the transport.
func (r requestServer) take(in inbound, w replier) bool {
	switch {
	case in.req != nil:
		r.serve(*in.req, w)
	case in.refusal != nil:
		r.log.Warn().Msg("a request of the server that is not valid JSON-RPC was refused")
		w.send(in.refusal)
	case in.drop != "":
		r.log.Warn().Str("reason", in.drop).Msg("a message of the server was dropped")
	default:
		return false
	}
	return true
}

// serve answers req through w, off the reader when a slot is free, and
// refuses it at once when none is.
func (r requestServer) serve(req serverRequest, w replier) {
	if w.inlinePing && req.method == string(mcp.MethodPing) {
		w.send(w.answer(req))
		return
	}
	select {
	case r.slots <- struct{}{}:
	default:
		w.send(errorReply(req.id, mcp.INTERNAL_ERROR, tooManyServerRequests, nil))
		return
	}
	if !w.start(func() {
		defer func() { <-r.slots }()
		w.send(w.answer(req))
	}) {
		<-r.slots
	}
}

// resultReply is the JSON-RPC response with result, both as bytes.
func resultReply(id, result json.RawMessage) []byte {
	// One byte more for the line end a stdio transport adds.
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result)+1)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// errorReply is the JSON-RPC error response; a nil id is written as null,
// a nil data is left out.
func errorReply(id json.RawMessage, code int, message string, data json.RawMessage) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b := make([]byte, 0, 64+len(id)+len(message)+len(data))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, rawjson.String(message)...)
	if len(data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	return append(b, "}}"...)
}

// oneLine returns the JSON value v without its line breaks, so that it
// fits a line-framed stream; every other byte stays. v must be valid JSON:
// then every '\n' and '\r' in it is whitespace between tokens (a JSON
// string cannot hold a raw one), and no two tokens it separated can merge.
// v without any is returned as it is.
func oneLine(v []byte) []byte {
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		return v
	}
	out := make([]byte, 0, len(v))
	for _, c := range v {
		if c != '\n' && c != '\r' {
			out = append(out, c)
		}
	}
	return out
}

// relayCapabilities are the client capabilities the proxy advertises
// upstream when it relays server requests to its own clients: whether a
// given downstream client can answer is decided per request.
func relayCapabilities() mcp.ClientCapabilities {
	var c mcp.ClientCapabilities
	c.Sampling = &mcp.SamplingCapability{}
	c.Elicitation = &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}
	c.Roots = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{}
	return c
}

// answer returns the reply to one request of the upstream: a ping is
// answered at once, the relayed methods through Options.OnRequest (method
// not found without it: nothing was advertised), anything else is method
// not found. The params go to OnRequest as they came, except for the line
// breaks between their tokens (oneLine: the client's stream may be lines);
// OnRequest's result goes into the reply as its bytes.
func (s *session) answer(ctx context.Context, req serverRequest) []byte {
	switch req.method {
	case string(mcp.MethodPing):
		return resultReply(req.id, json.RawMessage(`{}`))
	case string(mcp.MethodSamplingCreateMessage), string(mcp.MethodElicitationCreate), string(mcp.MethodListRoots):
		if s.c.opts.OnRequest != nil {
			break
		}
		fallthrough
	default:
		return errorReply(req.id, mcp.METHOD_NOT_FOUND, "method not found: "+sanitize.Error(req.method), nil)
	}
	res, err := s.c.opts.OnRequest(ctx, s.c.name, req.method, oneLine(req.params))
	if err != nil {
		var rpc *RPCError
		if errors.As(err, &rpc) {
			return errorReply(req.id, rpc.Code, rpc.Message, rpc.Data)
		}
		return errorReply(req.id, mcp.INTERNAL_ERROR, sanitize.Error(err.Error()), nil)
	}
	if len(res) == 0 {
		return errorReply(req.id, mcp.INTERNAL_ERROR, "no result", nil)
	}
	return resultReply(req.id, res)
}
