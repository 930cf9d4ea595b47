package upstream

import "sync"

// dispatcher delivers snapshots to OnSnapshot in the order they were
// pushed, one at a time, without holding any lock of the Conn while the
// hook runs. A goroutine runs only while snapshots wait: push starts one
// when none runs, and it ends when the queue is empty. Snapshots come on
// state changes and re-discoveries, so a Conn is idle nearly always, and an
// idle one keeps no goroutine (nor the stack its catalog builds grew). The
// queue is unbounded, but at most one re-discovery per kind is in flight,
// so it stays short unless the hook blocks, which its contract forbids.
type dispatcher struct {
	fn      func(*Snapshot)
	mu      sync.Mutex
	queue   []*Snapshot
	running bool // a delivery goroutine owns the queue
	stopped bool // stop was called: pushes are dropped once the queue is empty
	wg      sync.WaitGroup
}

// newDispatcher returns a dispatcher to fn. A nil fn discards snapshots.
func newDispatcher(fn func(*Snapshot)) *dispatcher {
	return &dispatcher{fn: fn}
}

// push queues s; it never blocks. After stop it drops s, unless the
// delivery stop waits for is still running (a hook that publishes).
func (d *dispatcher) push(s *Snapshot) {
	if d.fn == nil {
		return
	}
	d.mu.Lock()
	if d.stopped && !d.running {
		d.mu.Unlock()
		return
	}
	d.queue = append(d.queue, s)
	start := !d.running
	if start {
		d.running = true
		d.wg.Add(1)
	}
	d.mu.Unlock()
	if start {
		go d.deliver()
	}
}

// stop waits until what was pushed before it, and what the hook pushes
// meanwhile, is delivered.
func (d *dispatcher) stop() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.wg.Wait()
}

// deliver hands the queue to fn until it is empty.
func (d *dispatcher) deliver() {
	defer d.wg.Done()
	for {
		d.mu.Lock()
		batch := d.queue
		d.queue = nil
		if len(batch) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		for _, s := range batch {
			d.fn(s)
		}
	}
}
