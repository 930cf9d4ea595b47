package downstream

import (
	"sync"
	"testing"
	"time"
)

// Jobs never wait for one another: with every worker busy, run starts
// another, so eight blocked jobs all run at once; later jobs reuse the
// workers that went idle, and idle workers end.
func TestWorkersNeverQueue(t *testing.T) {
	w := newWorkers()
	w.idle = 200 * time.Millisecond
	release := make(chan struct{})
	var started sync.WaitGroup
	var done sync.WaitGroup
	for i := 0; i < 8; i++ {
		started.Add(1)
		done.Add(1)
		w.run(func() {
			started.Done()
			<-release
			done.Done()
		})
	}
	waitOrFail(t, &started, "eight blocked jobs did not all start")
	close(release)
	waitOrFail(t, &done, "the jobs did not finish")

	ran := make(chan struct{})
	w.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a job after the others did not run")
	}
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, msg string) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal(msg)
	}
}
