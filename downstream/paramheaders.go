package downstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// The Mcp-Param-* headers of a 2026-07-28 tools/call over Streamable HTTP
// (MCP 2026-07-28, basic/transports, "Custom Headers from Tool Parameters",
// SEP-2243). A tool may declare, with x-mcp-header in its inputSchema,
// arguments that the client mirrors into headers; a server that reads the
// body must check that each such header agrees with its argument, so that
// an intermediary routing on the header and the proxy acting on the body
// see the same request. The encoding and the comparison are mcp-go's, the
// same code that writes these headers on the proxy's own requests
// upstream (upstream/modern.go): one implementation for both directions.

// checkParamHeaders checks the Mcp-Param-* headers of a stateless HTTP
// tools/call against its arguments, for the tool as the client sees it
// (the exposed catalog entry: pinned arguments cut from its schema). A
// tool that declares no header, a request without HTTP headers (stdio) or
// of the session era is not checked. The error is -32020, which the
// transport answers with HTTP 400.
func checkParamHeaders(h http.Header, raw json.RawMessage, params json.RawMessage) *wireError {
	if h == nil || !bytes.Contains(raw, []byte("x-mcp-header")) {
		return nil // the common case, without a decode
	}
	schema, ok, err := rawjson.Get(raw, "inputSchema")
	if err != nil || !ok {
		return nil
	}
	tool := &mcp.Tool{RawInputSchema: schema}
	bindings := mcp.ExtractParamHeaderBindings(tool)
	if len(bindings) == 0 {
		return nil
	}
	for _, b := range bindings {
		vals := h.Values(b.HeaderName())
		switch {
		case len(vals) > 1:
			return headerMismatch(b.HeaderName(), "the header is sent more than once")
		case len(vals) == 1 && !headerValueOK(vals[0]):
			return headerMismatch(b.HeaderName(), "the value has characters a header value must not have; "+
				"send it as =?base64?…?=")
		}
	}
	lookup := func(name string) (string, bool) {
		vals := h.Values(name)
		if len(vals) == 0 {
			return "", false
		}
		return vals[0], true
	}
	if err := mcp.ValidateParamHeadersLookup(lookup, tool, params); err != nil {
		var hm mcp.HeaderMismatchError
		if errors.As(err, &hm) {
			return headerMismatch(hm.Header, hm.Reason)
		}
		return errorf(codeHeaderMismatch, "header mismatch: %s", sanitize.Error(err.Error()))
	}
	return nil
}

// headerMismatch is the -32020 error naming the header at fault.
func headerMismatch(header, reason string) *wireError {
	return errorf(codeHeaderMismatch, "header mismatch: %s: %s", truncate(header, 100), sanitize.Error(reason))
}

// headerValueOK reports whether v has only the characters MCP allows in a
// header value it mirrors (visible ASCII, space, horizontal tab; RFC 9110
// field values without obs-text). Anything else must come base64-encoded.
func headerValueOK(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}
