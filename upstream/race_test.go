//go:build race

package upstream

func init() { raceEnabled = true }
