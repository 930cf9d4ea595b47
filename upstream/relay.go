package upstream

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

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
