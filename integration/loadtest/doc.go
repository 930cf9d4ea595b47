// Command loadtest measures mcp-proxy against the thinnest stand-in in its
// place (the floor) and against a direct connection to the same upstream, in
// the same run, and prints the ratios next to the project's performance
// targets, with the CPU time per request of every process in the proxy's
// place.
//
// The machines that run it are shared and noisy, so absolute numbers mean
// little: every scenario runs its sides (direct, floor, proxy, and with -peer
// another proxy) in rounds whose order rotates, and the verdict is a ratio
// between two of them (or, for memory, an absolute peak RSS). The call
// scenarios run with two upstreams, the repo's fixture and a go-sdk echo
// server. The tool builds nothing: -proxy and -fixture name the mcp-proxy
// and integration/fixture binaries, and the floors and the go-sdk upstream
// are this binary re-executed in a role (roles.go). It writes the configs it
// needs into a temporary directory, talks raw JSON-RPC over stdio or
// Streamable HTTP on 127.0.0.1 only, and stops every process it started
// (process groups, and the proxy's own children) before it exits.
//
// A missed target is reported, not an error: the exit code is 0 unless a
// scenario could not run (1) or the command line was wrong (2).
package main
