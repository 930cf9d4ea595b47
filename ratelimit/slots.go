package ratelimit

import (
	"container/list"
	"context"
	"sync"
)

// Slots bound how many calls run at once. A call that finds every slot
// taken waits, and slots come free to the waiting calls in the order they
// arrived (FIFO): a call that arrives later never overtakes one that
// waits.
type Slots struct {
	mu      sync.Mutex
	free    int
	waiting list.List // of chan struct{}, closed when its call gets a slot
}

// NewSlots returns n free slots (n < 1 is taken as 1).
func NewSlots(n int) *Slots {
	return &Slots{free: max(n, 1)}
}

// TryAcquire takes a free slot if there is one and no call waits for one;
// it never waits. A true return must be followed by one Release.
func (s *Slots) TryAcquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && s.waiting.Len() == 0 {
		s.free--
		return true
	}
	return false
}

// Acquire takes a slot, waiting for one in arrival order while ctx lasts.
// It returns nil with the slot taken, or ctx's error without one. Every nil
// return must be followed by one Release.
func (s *Slots) Acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.free > 0 && s.waiting.Len() == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	granted := make(chan struct{})
	at := s.waiting.PushBack(granted)
	s.mu.Unlock()
	select {
	case <-granted:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-granted:
		// Release handed this call the slot as ctx ended: pass it on.
		s.releaseLocked()
	default:
		s.waiting.Remove(at)
	}
	return ctx.Err()
}

// Release gives a slot back: to the call that has waited longest, else to
// the free pool.
func (s *Slots) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked()
}

func (s *Slots) releaseLocked() {
	if first := s.waiting.Front(); first != nil {
		s.waiting.Remove(first)
		close(first.Value.(chan struct{}))
		return
	}
	s.free++
}

// Waiting is the number of calls waiting for a slot.
func (s *Slots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting.Len()
}
