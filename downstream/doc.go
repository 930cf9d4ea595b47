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
// Proxy (proxy.go) is the composition root: it builds the parts and wires
// them; each part owns its state and behaviour, in files named after it,
// and reaches the others through small interfaces it declares. env.go is
// what the parts read (options, log, the current config generation); the
// transports stdio.go and http.go (httpstream.go) only frame bytes; the
// route (route.go, with rpc.go and reply.go) reads every message and
// dispatches it; sessiontable.go holds the sessions, session.go and
// peer.go their streams and the proxy's requests to clients, and
// sessionstate.go what a session keeps between requests; lifecycle.go is
// the handshake; toolcall.go is the tool-call chain, with its steps in
// approval.go, overrides.go and limits.go; resources.go and listen.go
// serve resources, prompts, completions and subscriptions;
// owntools_search.go and owntools_resources.go are the proxy's own tools;
// views.go the tools each agent sees; tasks.go and tasktable.go pass
// the tasks of MCP 2025-11-25 through (task-augmented calls, tasks/*,
// the proxy's task ids bound to sessions); relay.go, roundtrip.go,
// progress.go and loglevel.go carry upstream requests and notifications
// to the right client; catalogstate.go, catalog.go and surface.go build
// the merged catalog. See docs/architecture.md.
package downstream
