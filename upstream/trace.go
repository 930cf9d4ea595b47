package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/tracing"
)

// peer is where a Conn's requests go, for the client spans' network
// attributes; computed once, and only when tracing is on.
type peer struct {
	transport string // tracing.TransportPipe or TransportTCP
	address   string
	port      int
}

func peerOf(cfg *config.Server, kind string) peer {
	if kind == config.TransportStdio {
		return peer{transport: tracing.TransportPipe}
	}
	p := peer{transport: tracing.TransportTCP}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return p
	}
	p.address = u.Hostname()
	if port := u.Port(); port != "" {
		p.port, _ = strconv.Atoi(port)
	} else if u.Scheme == "https" {
		p.port = 443
	} else {
		p.port = 80
	}
	if ip := net.ParseIP(p.address); ip != nil {
		p.address = ip.String()
	}
	return p
}

// startSpan starts the client span of one request on s and returns the
// ctx holding it and params carrying its context in _meta. With tracing
// off it returns its arguments and the zero Span, allocating nothing.
func (s *session) startSpan(ctx context.Context, method, id string, params json.RawMessage) (context.Context, tracing.Span, json.RawMessage) {
	t := s.c.opts.Tracer
	if t == nil {
		return ctx, tracing.Span{}, params
	}
	ctx, span := t.StartClient(ctx, tracing.ClientRequest{
		Method:    method,
		Params:    params,
		ID:        id,
		Server:    s.c.name,
		Protocol:  s.protocol,
		SessionID: s.tr.sessionID(),
		Transport: s.c.peer.transport,
		Address:   s.c.peer.address,
		Port:      s.c.peer.port,
	})
	return ctx, span, t.InjectMeta(ctx, params)
}

// endSpan ends a request's client span with the outcome of the call, in
// the metrics' vocabulary: ok, tool_error (a tools/call result with
// isError), error (with the JSON-RPC code when the server answered one),
// timeout or canceled.
func endSpan(span tracing.Span, method string, result json.RawMessage, err error) {
	if !span.IsRecording() {
		span.End(tracing.OutcomeOK, 0)
		return
	}
	span.End(outcomeOf(method, result, err))
}

// outcomeOf is endSpan's outcome of a call and the JSON-RPC code of its
// error (0 for none). A call that succeeded costs no allocation: the
// error's target is declared only for a failure, where errors.As takes
// its address and so moves it to the heap.
func outcomeOf(method string, result json.RawMessage, err error) (string, int) {
	if err == nil {
		if method == string(mcp.MethodToolsCall) {
			if v, ok, _ := rawjson.Get(result, "isError"); ok && string(v) == "true" {
				return metrics.OutcomeToolError, 0
			}
		}
		return tracing.OutcomeOK, 0
	}
	return failureOf(err)
}

// failureOf is outcomeOf for a call that failed with err.
func failureOf(err error) (string, int) {
	var rpc *RPCError
	switch {
	case errors.As(err, &rpc):
		return metrics.OutcomeError, rpc.Code
	case errors.Is(err, ErrConnectionLost), errors.Is(err, ErrNotConnected):
		return metrics.OutcomeError, 0
	case errors.Is(err, context.DeadlineExceeded):
		return metrics.OutcomeTimeout, 0
	case errors.Is(err, context.Canceled):
		return metrics.OutcomeCanceled, 0
	default:
		return metrics.OutcomeError, 0
	}
}
