package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// protocolVersion is the MCP version the load test's clients ask for.
const protocolVersion = "2025-11-25"

// maxMessageBytes bounds one incoming JSON-RPC message (a stdio line, an
// HTTP body, an SSE event): the largest scenario returns 1 MiB of text, and
// the proxy's own response cap is 16 MB.
const maxMessageBytes = 64 << 20

// errNoResponse is a request that ended without a JSON-RPC response.
var errNoResponse = errors.New("no response")

// client sends JSON-RPC requests on one MCP session. request is safe for
// concurrent use; concurrent requests are in flight together (pipelined by
// id on stdio, separate POSTs on HTTP). The returned result is the raw
// "result" member; a JSON-RPC error is an *rpcError.
type client interface {
	request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// rpcError is a JSON-RPC error response.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message)
}

// envelope is any incoming JSON-RPC message: a response (ID with Result or
// Error), a request from the server (ID and Method) or a notification.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// parseEnvelope decodes one message and checks the JSON-RPC shape.
func parseEnvelope(data []byte) (*envelope, error) {
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("bad JSON-RPC message: %w", err)
	}
	isResponse := e.Method == ""
	if isResponse && len(e.ID) == 0 {
		return nil, errors.New("bad JSON-RPC message: neither a method nor an id")
	}
	if isResponse && e.Result == nil && e.Error == nil {
		return nil, errors.New("bad JSON-RPC response: neither result nor error")
	}
	return &e, nil
}

// idKey is the map key of a response id: the id's bytes without spaces.
func idKey(raw json.RawMessage) string {
	return string(bytes.TrimSpace(raw))
}

// outcome turns a response into the request's return values.
func (e *envelope) outcome() (json.RawMessage, error) {
	if e.Error != nil {
		return nil, e.Error
	}
	return e.Result, nil
}

// encodeRequest builds a request (id >= 0) or a notification (id < 0).
func encodeRequest(id int64, method string, params json.RawMessage) []byte {
	b := make([]byte, 0, 64+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id >= 0 {
		b = append(b, `"id":`...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	m, _ := json.Marshal(method) // a string always marshals
	b = append(b, m...)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// replyToServer answers a request the server sent us: ping gets {}, anything
// else "method not found", as a client without capabilities should.
func replyToServer(e *envelope) []byte {
	id := []byte(e.ID)
	if e.Method == "ping" {
		return append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"result":{}}`...)
	}
	msg, _ := json.Marshal("method not found: " + e.Method)
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	b = append(b, `,"error":{"code":-32601,"message":`...)
	b = append(b, msg...)
	return append(b, "}}"...)
}

// initializeParams is what both clients send: no capabilities, so neither
// the fixture nor the proxy sends sampling or roots requests.
var initializeParams = json.RawMessage(`{"protocolVersion":"` + protocolVersion +
	`","capabilities":{},"clientInfo":{"name":"mcp-proxy-loadtest","version":"1.0.0"}}`)

// checkInitialize checks an initialize result names a protocol version.
func checkInitialize(res json.RawMessage) error {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.ProtocolVersion == "" {
		return fmt.Errorf("initialize: result without protocolVersion: %.200s", res)
	}
	return nil
}
