//go:build race

package scaleout

// raceEnabled: the test runs under the race detector, so the proxy
// replicas are built with -race too and their stderr is checked for
// race reports.
const raceEnabled = true
