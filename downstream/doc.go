// Package downstream is the MCP server that hosts talk to. It merges the
// catalogs of every upstream into one namespaced tool list, serves it over
// stdio or Streamable HTTP through mcp-go, and routes each tools/call to the
// upstream that owns the tool.
//
// mcp-go's typed encoders drop fields an aggregator must keep (unknown tool
// fields, annotation extras, top-level result fields) and flatten error codes.
// So the proxy registers small "shadow" tools with mcp-go, which then handles
// sessions, protocol versions and dispatch, and a thin layer on the wire
// (front.go) writes the upstream's own bytes into the responses that answer
// tools/list and tools/call. See README "Architecture".
package downstream
