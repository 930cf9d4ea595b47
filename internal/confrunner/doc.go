// Package confrunner runs the runner of the official MCP conformance suite
// (@modelcontextprotocol/conformance, which `npm ci --prefix integration`
// installs under integration/node_modules) for the tests: it finds the
// runner and node, preloads integration/conformance/node20 on Node.js
// older than 22 (the runner imports fs.globSync by name, which Node 22
// added), starts the runner in a process group of its own, runs one client
// scenario and reads back its checks.
//
// It is test support: nothing in the proxy imports it.
package confrunner
