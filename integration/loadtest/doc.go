// Command loadtest measures mcp-proxy against a direct connection to the same
// upstream, in the same run, and prints the ratios next to the project's
// performance targets.
//
// The machines that run it are shared and noisy, so absolute numbers mean
// little: every scenario runs its direct and its proxied side alternately in
// rounds, and the verdict is a ratio between the two (or, for memory, an
// absolute peak RSS). The tool builds nothing: -proxy and -fixture name the
// mcp-proxy and integration/fixture binaries. It writes the proxy configs it
// needs into a temporary directory, talks raw JSON-RPC over stdio or
// Streamable HTTP on 127.0.0.1 only, and stops every process it started
// (process groups, and the proxy's own children) before it exits.
//
// The floor-* scenarios (floor.go) put the thinnest possible stand-in where
// the proxy goes (a line relay, a plain reverse proxy, the upstreams started
// without any proxy): their ratios are what any proxy process pays on the
// machine, a lower bound for the proxy's.
//
// A missed target is reported, not an error: the exit code is 0 unless a
// scenario could not run (1) or the command line was wrong (2).
package main
