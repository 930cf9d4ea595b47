// Package httpguard holds the DNS rebinding checks every HTTP listener of
// the proxy (the MCP endpoint and the metrics listener) applies before it
// serves anything, as the MCP Streamable HTTP transport requires: by the
// Host header on a loopback listener, and by the Origin header. The
// predicates read the request only; Rebinding answers a refused request
// itself and never passes it on.
package httpguard
