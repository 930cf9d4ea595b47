package upstream

// raceEnabled is true when the tests run under the race detector (see
// race_test.go), whose sync.Pool drops items at random: allocation counts
// of code that uses a pool are then off by one now and then.
var raceEnabled bool
