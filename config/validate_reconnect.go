package config

import (
	"strconv"
	"time"
)

// validateReconnect checks servers.<s>.reconnect_wait (docs/operations.md#reconnection): 0 turns the
// wait off; a wait longer than the longest request timeout could never be
// used whole, since a waiting request ends with its own timeout. Negative
// durations are refused when the document is decoded.
func (c *Config) validateReconnect(v *validator) {
	for _, name := range sortedKeys(c.Servers) {
		s := c.Servers[name]
		if s == nil || s.ReconnectWait == nil {
			continue
		}
		path := joinPath(joinPath("servers", pathKey(name)), "reconnect_wait")
		switch d := s.ReconnectWait.D(); {
		case d < 0:
			v.add(path, "must not be negative (0 turns the wait off)")
		case d > MaxTimeout:
			v.add(path, "must be at most "+strconv.Itoa(int(MaxTimeout/time.Second))+"s, the longest request timeout")
		}
	}
}
