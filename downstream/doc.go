// Package downstream is the MCP server that hosts talk to. It merges the
// catalogs of every upstream into one namespaced view (tools, resources,
// templates, prompts), decides per agent and session what is listed and
// callable (with the filter package), serves it over stdio or Streamable
// HTTP, and routes each request to the upstream that owns it.
//
// The proxy owns its JSON-RPC and session layer: every message from every
// transport and protocol version (2024-11-05 through 2025-11-25 with
// sessions, and the stateless 2026-07-28 core) takes one route
// (route.go): the transport frames bytes (stdio.go, http.go,
// httpstream.go), the envelope is read once (rawjson.ParseMessage), and
// requests go through one method table behind middleware applied once
// (recovery, metrics and logs, the protocol era's checks, the stateless
// result decoration). Upstream bytes pass through: tool objects and
// results, resources and prompts are never decoded into typed structs.
//
// Files, by concern: route.go, rpc.go and lifecycle.go are the route, the
// JSON-RPC messages and the handshake (initialize, server/discover,
// logging/setLevel); session.go, sessions.go and peer.go hold sessions,
// their streams and the proxy's own requests to clients; toolcall.go is
// what happens to a tools/call (the call chain), with approval.go,
// overrides.go, limits.go, deferred.go and seedtools.go for the approval
// gate, tool overrides (docs/agents.md#overrides-and-rate-limits: also in the catalog build), rate limits
// and the proxy's own tools; catalog.go, refresh.go, surface.go and views.go build the merged
// view; surface_calls.go answers resources, prompts and completions;
// relay.go, progress.go, mrtr.go and listen.go carry upstream requests and
// notifications to the right client; loglevel.go tells each upstream the
// log level its sessions want. See docs/architecture.md.
package downstream
