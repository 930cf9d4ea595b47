package ratelimit

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Slots bound how many calls run at once. A call that finds every slot
// taken waits, and slots come free to the waiting calls in the order they
// arrived (FIFO): a call that arrives later never overtakes one that
// waits. golang.org/x/sync/semaphore's Weighted does the work: with a
// weight of one a call, its queue is that order, TryAcquire never takes a
// slot while a call waits, and a call that gives up as it is handed a slot
// passes the slot on.
type Slots struct {
	sem     *semaphore.Weighted
	waiting atomic.Int64 // calls inside Acquire
}

// NewSlots returns n free slots (n < 1 is taken as 1).
func NewSlots(n int) *Slots {
	return &Slots{sem: semaphore.NewWeighted(int64(max(n, 1)))}
}

// TryAcquire takes a free slot if there is one and no call waits for one;
// it never waits. A true return must be followed by one Release.
func (s *Slots) TryAcquire() bool {
	return s.sem.TryAcquire(1)
}

// Acquire takes a slot, waiting for one in arrival order while ctx lasts.
// It returns nil with the slot taken, or ctx's error without one (also when
// ctx had ended before the call, even with a slot free). Every nil return
// must be followed by one Release.
func (s *Slots) Acquire(ctx context.Context) error {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	return s.sem.Acquire(ctx, 1)
}

// Release gives a slot back: to the call that has waited longest, else to
// the free pool.
func (s *Slots) Release() {
	s.sem.Release(1)
}

// Waiting is the number of calls inside Acquire: those that wait for a
// slot, and for a moment those about to take one or to join the line.
func (s *Slots) Waiting() int {
	return int(s.waiting.Load())
}

// Queued reports whether a call waits in line for a slot. Unlike Waiting,
// it is true only once the call has its place in the line, so a test that
// needs one call to arrive after another waits for it.
func (s *Slots) Queued() bool {
	// A weight of zero is granted whenever nobody waits, and takes nothing.
	return !s.sem.TryAcquire(0)
}
