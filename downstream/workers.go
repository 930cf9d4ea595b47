package downstream

import "time"

// workers runs the answers the wire layer writes itself on goroutines that
// outlive one answer. A fresh goroutine per call started with a small stack
// and grew it on every call (the call path is deep); a worker keeps its
// grown stack. A job never waits for a worker: when none is idle, a new one
// starts, so concurrency is bounded by the callers, not here.
type workers struct {
	jobs chan func() // unbuffered: a send succeeds only into an idle worker
	idle time.Duration
}

// workerIdle is how long a worker waits for the next job before it ends.
const workerIdle = 5 * time.Second

func newWorkers() *workers { return &workers{jobs: make(chan func()), idle: workerIdle} }

// run runs fn on an idle worker, or on a new one.
func (w *workers) run(fn func()) {
	select {
	case w.jobs <- fn:
	default:
		go w.work(fn)
	}
}

func (w *workers) work(fn func()) {
	fn()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		select {
		case fn := <-w.jobs:
			fn()
			t.Reset(w.idle)
		case <-t.C:
			return
		}
	}
}
