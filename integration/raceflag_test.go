package integration

// raceEnabled is true when the tests run under the race detector (see
// race_test.go); the proxy is then built with -race as well.
var raceEnabled bool
