package upstream

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// Bounds on the requests an upstream sends the proxy (sampling, elicitation,
// roots, ping): a server that floods them, or stops reading the answers,
// must not grow the proxy (SPEC §9).
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

// limitRequests answers requests through next with at most
// maxServerRequests in flight; the excess gets an error at once. The stdio
// transport bounds its own handlers (it owns their goroutines and the
// writes of their replies); the HTTP and SSE transports are wrapped in this.
func limitRequests(next transport.RequestHandler) transport.RequestHandler {
	slots := make(chan struct{}, maxServerRequests)
	return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		select {
		case slots <- struct{}{}:
		default:
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, tooManyServerRequests, nil), nil
		}
		defer func() { <-slots }()
		return next(ctx, req)
	}
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

// serveRequest answers one request of the upstream to the client.
func (s *session) serveRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	switch req.Method {
	case string(mcp.MethodPing):
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	case string(mcp.MethodSamplingCreateMessage), string(mcp.MethodElicitationCreate), string(mcp.MethodListRoots):
	default:
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "method not found: "+sanitize.Error(req.Method), nil), nil
	}
	var params json.RawMessage
	if req.Params != nil {
		b, err := json.Marshal(req.Params)
		if err != nil {
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.INVALID_PARAMS, "invalid params", nil), nil
		}
		params = b
	}
	res, err := s.c.opts.OnRequest(ctx, s.c.name, req.Method, params)
	if err != nil {
		var rpc *RPCError
		if errors.As(err, &rpc) {
			return transport.NewJSONRPCErrorResponse(req.ID, rpc.Code, rpc.Message, nil), nil
		}
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, sanitize.Error(err.Error()), nil), nil
	}
	return transport.NewJSONRPCResultResponse(req.ID, res), nil
}
