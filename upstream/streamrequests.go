package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Requests of an http or sse upstream to the proxy arrive in its event
// streams: the SSE response of a POST and the GET stream (Streamable HTTP),
// the one stream of a legacy SSE server. mcp-go's Streamable HTTP client
// would decode them into its JSONRPCRequest (params an `any`), bound their
// handling to 30 s and marshal the reply with HTML escaping; its legacy SSE
// client cannot take them at all (a request whose id matched a pending one
// would even be taken for its response). So the outermost RoundTripper of
// the session's HTTP client (requestTransport) takes them out of every
// event stream before mcp-go reads it (eventFilter), answers them through
// session.answer with their bytes, and POSTs the reply bytes itself.

// maxReplyAckBytes bounds what is read of the server's answer to a posted
// reply (202 with no body, in practice): it is only drained, so that the
// connection can be reused.
const maxReplyAckBytes = 64 << 10

// requestTransport is the outermost RoundTripper of an http or sse
// upstream. A 200 text/event-stream response gets its body filtered: each
// event that is a request of the server to the proxy is taken out and
// answered, with at most maxServerRequests in flight (the excess, and a
// request refused by readServerRequest, is answered at once from the
// stream's reader, which then waits for that POST). Every other response
// passes untouched.
//
// A request is answered with the context of the stream's HTTP request (over
// Streamable HTTP a call's POST carries the call's context, which says
// which client the request belongs to), ended also when the session ends;
// its reply is posted within the server's request timeout. Replies go to
// the server URL with the stream's session id and protocol version
// (Streamable HTTP), or to the endpoint the SSE server advertised.
type requestTransport struct {
	next     http.RoundTripper
	s        *session
	legacy   bool         // legacy SSE: messages only in "message" events, replies to the endpoint
	client   *http.Client // posts the replies: the session's client (this transport included)
	requests requestServer
}

func newRequestTransport(next http.RoundTripper, s *session, legacy bool) *requestTransport {
	return &requestTransport{next: next, s: s, legacy: legacy, requests: newRequestServer(s.log)}
}

// replyTo is where the replies to one stream's requests go.
type replyTo struct {
	session, version string // Streamable HTTP headers; "" = not sent
}

func (t *requestTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Body == nil || !isEventStream(resp.Header.Get("Content-Type")) {
		return resp, err
	}
	to := replyTo{
		session: req.Header.Get(transport.HeaderKeySessionID),
		version: req.Header.Get(transport.HeaderKeyProtocolVersion),
	}
	if to.session == "" { // the initialize POST's stream: the session is in the response
		to.session = resp.Header.Get(transport.HeaderKeySessionID)
	}
	ctx := req.Context()
	resp.Body = newEventFilter(resp.Body, t.legacy, func(data []byte) bool { return t.take(ctx, to, data) })
	return resp, nil
}

// take answers data when it is a request of the server to the proxy, and
// reports whether it was one (or a message to drop). A request is answered
// on a goroutine of the session, with ctx ended also when the session ends.
func (t *requestTransport) take(ctx context.Context, to replyTo, data []byte) bool {
	return t.requests.take(readServerRequest(data), replier{
		answer: func(req serverRequest) []byte {
			actx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(t.s.ctx, cancel)()
			return t.s.answer(actx, req)
		},
		send:  func(reply []byte) { t.post(to, reply) },
		start: t.s.spawn,
	})
}

// post sends reply to the server, within its request timeout and the
// session's life. A failure is logged: nobody else waits for it.
func (t *requestTransport) post(to replyTo, reply []byte) {
	url := t.s.c.cfg.URL
	if t.legacy {
		sse, _ := t.s.tr.(*transport.SSE)
		if sse == nil || sse.GetEndpoint() == nil {
			t.s.log.Warn().Msg("a response to the server was not sent: no message endpoint yet")
			return
		}
		url = sse.GetEndpoint().String()
		to.version, _ = t.s.wireProtocol.Load().(string)
	}
	ctx, cancel := context.WithTimeout(t.s.ctx, t.s.c.requestTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(reply))
	if err != nil {
		t.s.log.Warn().Err(safe(err)).Msg("a response to the server was not sent")
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if to.session != "" {
		req.Header.Set(transport.HeaderKeySessionID, to.session)
	}
	if to.version != "" {
		req.Header.Set(transport.HeaderKeyProtocolVersion, to.version)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		t.s.log.Debug().Err(safe(err)).Msg("post a response to the server")
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplyAckBytes))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.s.log.Warn().Int("status", resp.StatusCode).Msg("the server refused a response to its request")
	}
}

// unreadRequest is the request handler given to mcp-go's Streamable HTTP
// transport in place of its client's: requestTransport takes every request
// it can read out of the streams, so one that reaches mcp-go is one the
// proxy could not read as JSON-RPC.
func unreadRequest(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	return transport.NewJSONRPCErrorResponse(req.ID, mcp.INVALID_REQUEST, "invalid request", nil), nil
}
