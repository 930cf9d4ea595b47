// Package httpguard holds the checks every HTTP listener of the proxy (the
// MCP endpoint and the metrics listener) applies before it serves anything:
// DNS rebinding protection by the Host and Origin headers, as the MCP
// Streamable HTTP transport requires, and static bearer tokens compared in
// constant time. The predicates read the request only; the middlewares
// (Rebinding, Bearer) answer a refused request themselves and never pass it
// on.
package httpguard
