package upstream

import (
	"math/rand/v2"
	"time"
)

// The reconnect schedule (docs/operations.md#reconnection, seed): after a dropped connection, or a
// first connection that failed, reconnectAttempts attempts follow, waiting
// backoffBase doubled per attempt (1, 2, 4, 8, 16 s), each wait jittered by
// ±backoffJitter and never above backoffCap; then the server is parked and
// probed every defaultProbeInterval until a probe connects.
const (
	reconnectAttempts    = 5
	backoffBase          = time.Second
	backoffCap           = 60 * time.Second
	backoffJitter        = 0.2
	defaultProbeInterval = 300 * time.Second
)

// specBackoff is the documented wait (docs/operations.md#reconnection) before reconnect attempt n (n >= 1), with
// a random jitter.
func specBackoff(n int) time.Duration { return jitteredBackoff(n, rand.Float64()) }

// jitteredBackoff is the wait before reconnect attempt n for a jitter draw r
// in [0, 1): backoffBase·2^(n-1), capped at backoffCap, scaled into
// [1-backoffJitter, 1+backoffJitter) of itself, and capped again, so no wait
// is ever longer than backoffCap.
func jitteredBackoff(n int, r float64) time.Duration {
	base := backoffCap
	if n < 1 {
		n = 1
	}
	if n <= 7 { // 2^6 s is already past the cap; larger shifts could overflow
		base = min(backoffBase<<(n-1), backoffCap)
	}
	d := time.Duration(float64(base) * (1 - backoffJitter + 2*backoffJitter*r))
	return min(d, backoffCap)
}

// schedule decides, after a failed attempt, how long to wait and whether the
// server is parked.
type schedule struct {
	backoff func(n int) time.Duration // wait before reconnect attempt n
	probe   time.Duration             // wait between probes once parked
}

// scheduleOf builds the schedule from the Options: nil Backoff is the
// documented one, a ProbeInterval <= 0 is 300 s.
func scheduleOf(o Options) schedule {
	s := schedule{backoff: o.Backoff, probe: o.ProbeInterval}
	if s.backoff == nil {
		s.backoff = specBackoff
	}
	if s.probe <= 0 {
		s.probe = defaultProbeInterval
	}
	return s
}

// after returns the wait that follows the failure of attempt failed (0: the
// first connection or the live connection; n: reconnect attempt n) and
// whether the server is parked from then on.
func (s schedule) after(failed int) (wait time.Duration, parked bool) {
	if failed >= reconnectAttempts {
		return s.probe, true
	}
	return max(s.backoff(failed+1), 0), false
}
