package ratelimit

import (
	"math"
	"sync"
	"time"
)

// slack absorbs floating-point error in the refill, so that a call made
// exactly when Take said a token would be there gets it.
const slack = 1e-9

// Bucket is a token bucket: it holds up to Capacity tokens, starts full,
// and gains PerMinute/60 tokens a second; a call takes one.
//
// It is ours rather than golang.org/x/time/rate's Limiter, which has the
// same refill and burst but cannot keep a promise of the docs
// (docs/agents.md#overrides-and-rate-limits) nor one of Take's:
//   - A call gives back what it took when a later bucket refuses it, or
//     when a stateless client's approval question goes out (the retry
//     takes the tokens again), possibly seconds after taking them. A
//     Limiter gives tokens back only by Reservation.CancelAt, which does
//     nothing once the reservation's time to act has passed (so not at a
//     later now), and CancelAt at the taking time moves the Limiter's clock
//     back, so the time in between would be refilled twice (Give;
//     TestBucket).
//   - A refused call is told when to retry, and a retry at that moment
//     passes. The Limiter truncates the delay it computes to the
//     nanosecond, so a retry then can find 0.999… tokens and be refused
//     again (147 of 154,000 delays tried at per_minute 1 to 600; slack
//     below absorbs that, TestBucketSlowRate).
//
// A clock that goes back also moves a Limiter's clock back (the same
// double refill); here it earns nothing.
type Bucket struct {
	capacity float64
	rate     float64 // tokens a second

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket of capacity burst refilled at perMinute
// tokens a minute. Both must be greater than 0 (config validation sees to
// it); anything else is taken as 1.
func NewBucket(perMinute, burst int, now time.Time) *Bucket {
	perMinute, burst = max(perMinute, 1), max(burst, 1)
	return &Bucket{capacity: float64(burst), rate: float64(perMinute) / 60, tokens: float64(burst), last: now}
}

// refill adds the tokens earned since the last call. A clock that went back
// earns nothing.
func (b *Bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.capacity, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// Take takes one token at now. When the bucket has none, ok is false and
// wait is how long until it will have one (never less than a nanosecond).
func (b *Bucket) Take(now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if b.tokens >= 1-slack {
		b.tokens = math.Max(0, b.tokens-1)
		return true, 0
	}
	wait = time.Duration(math.Round((1 - b.tokens) / b.rate * float64(time.Second)))
	return false, max(wait, time.Nanosecond)
}

// Give puts back a token taken at or before now, for a call that was not
// sent after all; the bucket never holds more than its capacity.
func (b *Bucket) Give(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.tokens = math.Min(b.capacity, b.tokens+1)
}
