// Package downstream is the MCP server that hosts talk to. It merges the
// catalogs of every upstream into one namespaced view (tools, resources,
// templates, prompts), decides per agent and session what is listed and
// callable (with the filter package), serves it over stdio or Streamable
// HTTP through mcp-go, and routes each request to the upstream that owns it.
//
// mcp-go's typed encoders drop fields an aggregator must keep (unknown tool
// fields, annotation extras, top-level result fields) and flatten error
// codes. So the proxy registers small "shadow" tools with mcp-go, which then
// handles sessions, protocol versions and dispatch, and a thin layer on the
// wire (front.go) writes the upstream's own bytes into the responses that
// answer tools/list and tools/call, and answers the resources, prompts and
// completion methods itself (surface_calls.go).
//
// Files, by concern: catalog.go and surface.go build the merged view;
// state.go and deferred.go hold per-session state and views; call.go,
// approval.go and seedtools.go are the call path and the proxy's own tools;
// relay.go and progress.go carry upstream requests and notifications to the
// right session; stdio.go, http.go, auth.go and sessions.go serve the
// transports. See README "Architecture".
package downstream
