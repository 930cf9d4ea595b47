package upstream

import (
	"errors"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/oauthclient"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// ErrResponseTooLarge is matched (errors.Is) by every *ResponseTooLargeError.
var ErrResponseTooLarge = errors.New("MCP response body exceeds the byte limit")

// ResponseTooLargeError reports an upstream message longer than the
// configured max_response_bytes (docs/configuration.md#servers). Its text is the one the host
// sees.
type ResponseTooLargeError struct {
	Limit int64 // the limit in bytes
}

func (e *ResponseTooLargeError) Error() string {
	return "MCP response body exceeds the " + strconv.FormatInt(e.Limit, 10) + "-byte limit"
}

// Unwrap makes errors.Is(err, ErrResponseTooLarge) true.
func (e *ResponseTooLargeError) Unwrap() error { return ErrResponseTooLarge }

// InvalidResultError reports a response whose result is not a JSON
// object: every MCP result is one (an empty result is {}), so a null, a
// string or an array is passed on to no client. It matches ErrBadResponse.
type InvalidResultError struct {
	Server, Method string
	// Result is the start of the result as the server wrote it.
	Result string
}

// maxResultQuote bounds the part of an invalid result an error quotes.
const maxResultQuote = 40

func newInvalidResultError(server, method string, result []byte) *InvalidResultError {
	quote := string(result)
	if len(quote) > maxResultQuote {
		quote = strings.ToValidUTF8(quote[:maxResultQuote], "") + "…"
	}
	return &InvalidResultError{Server: server, Method: method, Result: quote}
}

func (e *InvalidResultError) Error() string {
	return sanitize.Error("upstream " + strconv.Quote(e.Server) + " returned an invalid " + e.Method + " result: " + e.Result)
}

// Unwrap makes errors.Is(err, ErrBadResponse) true.
func (e *InvalidResultError) Unwrap() error { return ErrBadResponse }

// Sentinels of the connection core (conn.go, session.go, request.go).
var (
	// ErrNotConnected: the server has no live connection (connecting,
	// failed or closed). The downstream shows "MCP server '<name>' is not
	// connected".
	ErrNotConnected = errors.New("not connected")
	// ErrConnectionLost: the connection died while the request was in
	// flight; its outcome is unknown and it is never re-sent.
	ErrConnectionLost = errors.New("connection lost")
	// ErrProcessExited: a stdio server's process ended.
	ErrProcessExited = errors.New("process exited")
	// ErrSessionExpired: a Streamable HTTP server answered 404 or 410 for
	// the session id the proxy held. The session is re-initialized and the
	// request that met it re-sent once (it was not executed); when that
	// fails too, the connection is dropped and reconnected. A request that
	// fails this way also matches ErrNotConnected.
	ErrSessionExpired = errors.New("HTTP session expired")
	// ErrConnectTimeout: connect, initialize and first discovery took longer
	// than connect_timeout.
	ErrConnectTimeout = errors.New("connect timed out")
	// ErrRepeatedCursor: a paginated list returned a cursor it had already
	// returned, which would loop forever.
	ErrRepeatedCursor = errors.New("list repeated a pagination cursor")
	// ErrBadResponse: the upstream answered with something that is not a
	// valid response for the method.
	ErrBadResponse = errors.New("malformed upstream response")
	// ErrBadRequest: the params given to Request or Notify are not a JSON
	// object.
	ErrBadRequest = errors.New("invalid request")
	// ErrUnknownTransport: the server's transport is not stdio, http or sse.
	ErrUnknownTransport = errors.New("unknown transport")
	// ErrNeedsAuth: the server needs an OAuth authorization (StateNeedsAuth).
	// A request refused for it also matches ErrNotConnected: it was not
	// executed. Its text names the `mcp-proxy auth login` command.
	ErrNeedsAuth = oauthclient.ErrNeedsAuth

	// errSessionClosed is why a session the proxy closed itself died.
	errSessionClosed = errors.New("connection closed")
	// errStdoutClosed: a stdio child closed its stdout but did not exit.
	errStdoutClosed = errors.New("process closed its stdout")
	// errSessionEnded fails a stdio request whose session died before the
	// request was answered (stdioTransport.ended); the session says why
	// (session.lost, session.explain).
	errSessionEnded = errors.New("session ended")
	// errStdinStalled: a stdio child took no input for stdinStallTimeout
	// while the proxy had some for it: it is treated as hung.
	errStdinStalled = errors.New("the server stopped reading its stdin")
)
