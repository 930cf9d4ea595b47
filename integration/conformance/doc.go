// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in integration/package.json)
// against mcp-proxy. The suite's reference server is go-sdk's
// conformance/everything-server. The tests run the whole server suite twice:
// once straight at the reference server over Streamable HTTP, and once at
// mcp-proxy listening on Streamable HTTP with the reference server behind it
// over stdio (`prefix: ""`, so the fixture's names stay bare). Every scenario
// that passes directly must pass through the proxy, unless
// expected-failures.yml lists it with a comment saying why.
//
// The client scenarios (TestConformanceClient) make the proxy the client
// under test: the runner starts each scenario's server and runs
// clienthost/, a go-sdk host that starts mcp-proxy over stdio with that
// server as its one upstream and calls the scenario's tool through it; the
// auth scenarios exercise the proxy's OAuth client (clienthost in `open`
// mode stands in for the browser). Every listed scenario must pass.
//
// The runner comes from `npm ci --prefix integration` (.ci/run does it);
// without it the tests fail and say so. Node.js older than 22 gets the
// node20/ preload (see node20/register.mjs). Everything listens on
// 127.0.0.1, and every process the tests start is stopped before they end.
package conformance
