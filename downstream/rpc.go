package downstream

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// JSON-RPC error codes the proxy answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	// codeServerError is the implementation-defined range's first code, used
	// for routing failures: the upstream is not connected or went away.
	codeServerError = -32000
	// codeTimeout is the code MCP SDKs use for a request that timed out.
	codeTimeout = -32001
	// codeResourceNotFound is MCP's error code for an unknown resource.
	codeResourceNotFound = -32002
	// codeHeaderMismatch: a 2026-07-28 request's MCP headers are missing
	// or disagree with its body.
	codeHeaderMismatch = -32020
	// codeMissingCapability: a 2026-07-28 request needs a client
	// capability the client did not declare.
	codeMissingCapability = -32021
	// codeUnsupportedVersion: a 2026-07-28 request names a protocol
	// version the proxy does not serve.
	codeUnsupportedVersion = -32022
	// codeRefused is the code of the upstream requests the proxy refuses.
	codeRefused = codeServerError
)

// wireError is a JSON-RPC error the proxy sends downstream as it is.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *wireError) Error() string { return e.Message }

// errorf builds a wireError with a formatted message.
func errorf(code int, format string, a ...any) *wireError {
	return &wireError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// errorResponse is the response carrying werr. A request whose id could
// not be read is answered with id null (JSON-RPC 2.0 §5).
func errorResponse(id json.RawMessage, werr *wireError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(werr) // a struct of a string, an int and valid JSON: never fails
	return response(id, "error", b).bytes()
}

// notification builds a JSON-RPC notification; params may be nil.
func notification(method string, params []byte) []byte {
	return clientRequest(nil, method, params)
}

// clientRequest builds a JSON-RPC request of the proxy to its client, or a
// notification when id is empty; params may be nil.
func clientRequest(id json.RawMessage, method string, params []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(params) + len(method) + len(id) + 48)
	buf.WriteString(`{"jsonrpc":"2.0",`)
	if len(id) > 0 {
		buf.WriteString(`"id":`)
		buf.Write(id)
		buf.WriteByte(',')
	}
	buf.WriteString(`"method":`)
	buf.Write(rawjson.String(method))
	if len(params) > 0 {
		buf.WriteString(`,"params":`)
		buf.Write(params)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}
