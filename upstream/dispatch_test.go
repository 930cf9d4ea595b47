package upstream

import (
	"sync"
	"testing"
)

// TestDispatcherOrderAndStop pushes from several goroutines, and from the
// hook itself, and checks that every snapshot pushed before stop, or by
// the hook while stop waits, is delivered once, each pusher's in its
// order, one at a time; that no goroutine is left once the queue is empty;
// and that pushes after stop are dropped.
func TestDispatcherOrderAndStop(t *testing.T) {
	t.Parallel()
	const pushers, each = 4, 500
	const echo = 1 << 32 // added to the generation of a snapshot the hook pushes
	var (
		mu      sync.Mutex
		got     []uint64
		inHook  bool
		overlap bool
		d       *dispatcher
	)
	d = newDispatcher(func(s *Snapshot) {
		mu.Lock()
		if inHook {
			overlap = true
		}
		inHook = true
		got = append(got, s.Generation)
		mu.Unlock()
		if s.Generation%100 == 0 {
			// A hook that publishes again (a snapshot's hook may): the
			// new one comes after the one being delivered.
			d.push(&Snapshot{Generation: echo + s.Generation})
		}
		mu.Lock()
		inHook = false
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				d.push(&Snapshot{Generation: uint64(p*each + i + 1)})
			}
		})
	}
	wg.Wait()
	d.stop()
	d.push(&Snapshot{Generation: 1 << 40})
	d.mu.Lock()
	running, queued := d.running, len(d.queue)
	d.mu.Unlock()
	if running || queued != 0 {
		t.Fatalf("after stop: running %t, %d queued; want no goroutine and an empty queue", running, queued)
	}

	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Fatal("the hook ran twice at once")
	}
	last := make([]uint64, pushers)
	seen := map[uint64]bool{}
	echoes := 0
	for _, g := range got {
		if seen[g] {
			t.Fatalf("snapshot %d delivered twice", g)
		}
		seen[g] = true
		if g > echo {
			if !seen[g-echo] {
				t.Fatalf("the hook's snapshot %d came before the one it was pushed from", g)
			}
			echoes++
			continue
		}
		p := (g - 1) / each
		if g <= last[p] {
			t.Fatalf("pusher %d: snapshot %d after %d", p, g, last[p])
		}
		last[p] = g
	}
	if want := pushers*each + pushers*each/100; len(got) != want || echoes != pushers*each/100 {
		t.Fatalf("delivered %d (%d from the hook); want %d (%d)", len(got), echoes, want, pushers*each/100)
	}
}

// TestDispatcherNilHook drops every snapshot and starts nothing.
func TestDispatcherNilHook(t *testing.T) {
	t.Parallel()
	d := newDispatcher(nil)
	d.push(&Snapshot{Generation: 1})
	if d.running || len(d.queue) != 0 {
		t.Fatalf("nil hook: running %t, %d queued", d.running, len(d.queue))
	}
	d.stop()
}
