// Package registry reads the MCP Registry (its REST API under /v0.1/servers
// and the server.json documents it serves) and turns one server's package or
// remote into the servers entry of an mcp-proxy config: the command line or
// URL, with every variable the user must supply written as ${VAR} and never
// a value of theirs. It also asks the npm and PyPI registries for a
// package's latest version, for `mcp-proxy add --npm` and `--pypi`.
//
// Everything it reads is untrusted: responses are bounded in size and
// checked before use, and every error names the URL it tried but nothing
// of what came back. See docs/configuration.md#adding-a-server-from-the-registry.
package registry
