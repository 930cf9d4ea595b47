//go:build race

package conformance

// raceEnabled: the tests run under the race detector, so mcp-proxy is built
// with -race too and its stderr is checked for race reports.
const raceEnabled = true
