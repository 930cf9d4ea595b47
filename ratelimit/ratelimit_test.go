package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	b := NewBucket(60, 3, t0) // one token a second, three at most
	for i := range 3 {
		if ok, _ := b.Take(t0); !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
	}
	ok, wait := b.Take(t0)
	if ok || wait != time.Second {
		t.Fatalf("4th call: ok %v, wait %s; want refused, 1s", ok, wait)
	}
	if ok, wait := b.Take(at(400 * time.Millisecond)); ok || wait != 600*time.Millisecond {
		t.Fatalf("after 0.4 s: ok %v, wait %s; want refused, 600ms", ok, wait)
	}
	if ok, _ := b.Take(at(time.Second)); !ok {
		t.Fatal("refused after one second of refill")
	}
	// A long pause refills to the capacity, not beyond.
	for i := range 3 {
		if ok, _ := b.Take(at(time.Hour)); !ok {
			t.Fatalf("after an hour: call %d refused", i+1)
		}
	}
	if ok, _ := b.Take(at(time.Hour)); ok {
		t.Fatal("the bucket held more than its capacity")
	}
	// Give returns a token, up to the capacity.
	b.Give(at(time.Hour))
	if ok, _ := b.Take(at(time.Hour)); !ok {
		t.Fatal("a given token was not there")
	}
	// A clock that goes back earns nothing and breaks nothing.
	if ok, wait := b.Take(at(time.Minute)); ok || wait <= 0 {
		t.Fatalf("clock back: ok %v, wait %s", ok, wait)
	}
}

func TestBucketSlowRate(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := NewBucket(2, 2, t0) // a token every 30 s
	b.Take(t0)
	b.Take(t0)
	ok, wait := b.Take(t0.Add(10 * time.Second))
	if ok || wait != 20*time.Second {
		t.Fatalf("ok %v, wait %s; want refused, 20s", ok, wait)
	}
	// A retry exactly when Take said passes, whatever the float error.
	if ok, _ := b.Take(t0.Add(10*time.Second + wait)); !ok {
		t.Fatal("the retry at the promised time was refused")
	}
	for _, pm := range []int{7, 13, 59, 61, 997} {
		b := NewBucket(pm, 1, t0)
		b.Take(t0)
		now := t0.Add(123456789 * time.Nanosecond)
		ok, wait := b.Take(now)
		if !ok {
			if ok, _ := b.Take(now.Add(wait)); !ok {
				t.Fatalf("per_minute %d: refused at the promised time", pm)
			}
		}
	}
}

func TestSlotsFIFO(t *testing.T) {
	s := NewSlots(1)
	ctx := context.Background()
	if err := s.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	var wg sync.WaitGroup
	wait := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			order <- i
			s.Release()
		}()
	}
	// The second call arrives once the first has its place in line.
	wait(0)
	for !s.Queued() {
		time.Sleep(time.Millisecond)
	}
	wait(1)
	for s.Waiting() != 2 {
		time.Sleep(time.Millisecond)
	}
	s.Release()
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d got the slot in place %d", got, want)
		}
		want++
	}
	if want != 2 {
		t.Fatalf("%d waiters got the slot, want 2", want)
	}
}

func TestSlotsTryAcquire(t *testing.T) {
	s := NewSlots(1)
	if !s.TryAcquire() || s.TryAcquire() {
		t.Fatal("TryAcquire: want one slot, then none")
	}
	got := make(chan struct{})
	go func() {
		_ = s.Acquire(context.Background())
		close(got)
	}()
	for !s.Queued() {
		time.Sleep(time.Millisecond)
	}
	// A released slot goes to the waiting call, not to a later TryAcquire.
	s.Release()
	<-got
	if s.TryAcquire() {
		t.Fatal("TryAcquire overtook a waiting call")
	}
	s.Release()
	if !s.TryAcquire() {
		t.Fatal("TryAcquire found no free slot")
	}
}

func TestSlotsCancel(t *testing.T) {
	s := NewSlots(2)
	ctx := context.Background()
	_ = s.Acquire(ctx)
	_ = s.Acquire(ctx)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- s.Acquire(cctx) }()
	for !s.Queued() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if s.Waiting() != 0 || s.Queued() {
		t.Fatal("a cancelled call still waits")
	}
	// Both slots come back; nothing leaked to the cancelled call.
	s.Release()
	s.Release()
	for range 2 {
		if err := s.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tctx, stop := context.WithTimeout(ctx, 10*time.Millisecond)
	defer stop()
	if err := s.Acquire(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third slot: %v", err)
	}
}

// TestSlotsRace hands slots to calls that give up at the same moment: no
// slot is lost or made.
func TestSlotsRace(t *testing.T) {
	s := NewSlots(3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	running, peak := 0, 0
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*time.Millisecond)
			defer cancel()
			if s.Acquire(ctx) != nil {
				return
			}
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			s.Release()
		}()
	}
	wg.Wait()
	if peak > 3 {
		t.Fatalf("%d calls ran at once with 3 slots", peak)
	}
	for range 3 {
		if err := s.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if fourth := s.TryAcquire(); fourth || s.Waiting() != 0 || s.Queued() {
		t.Fatalf("slots after the storm: a fourth free %v, %d waiting", fourth, s.Waiting())
	}
}
