// Package metrics holds mcp-proxy's Prometheus collectors. A Metrics value is
// registered on a registerer the caller passes in (never the global one), and
// every label is bounded: server, tool (the upstream's own name), agent,
// method, outcome, rule, transport. Arguments, URIs and session ids never
// become labels.
package metrics
