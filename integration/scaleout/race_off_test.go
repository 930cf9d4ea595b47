//go:build !race

package scaleout

// raceEnabled: see race_on_test.go.
const raceEnabled = false
