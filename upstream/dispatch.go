package upstream

import "sync"

// dispatcher delivers snapshots to OnSnapshot on one goroutine, in the order
// they were pushed, without holding any lock of the Conn while the hook runs.
// The queue is unbounded, but snapshots are only made on state changes and
// re-discoveries (at most one in flight per kind), so it stays short unless
// the hook blocks, which its contract forbids.
type dispatcher struct {
	fn    func(*Snapshot)
	mu    sync.Mutex
	queue []*Snapshot
	wake  chan struct{} // capacity 1
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// newDispatcher starts the delivery goroutine; stop ends it. A nil fn
// discards snapshots.
func newDispatcher(fn func(*Snapshot)) *dispatcher {
	d := &dispatcher{
		fn:   fn,
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go d.loop()
	return d
}

// push queues s; it never blocks.
func (d *dispatcher) push(s *Snapshot) {
	if d.fn == nil {
		return
	}
	d.mu.Lock()
	d.queue = append(d.queue, s)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// stop delivers what is queued, then ends the goroutine and waits for it.
func (d *dispatcher) stop() {
	d.once.Do(func() { close(d.quit) })
	<-d.done
}

func (d *dispatcher) loop() {
	defer close(d.done)
	for {
		select {
		case <-d.wake:
			d.drain()
		case <-d.quit:
			d.drain()
			return
		}
	}
}

func (d *dispatcher) drain() {
	for {
		d.mu.Lock()
		batch := d.queue
		d.queue = nil
		d.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, s := range batch {
			d.fn(s)
		}
	}
}
