//go:build redis

package store

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// aofSize is the size of Redis's append-only file (INFO persistence).
func aofSize(t *testing.T, s *Store) int {
	t.Helper()
	info, err := s.Redis().Client().Info(t.Context(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "aof_current_size:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no aof_current_size in %q", info)
	return 0
}

// TestLimitsSkipTheAOF: taking tokens and a lease, giving a token back and
// releasing the lease append nothing to the AOF (each append would wait
// for the disk with appendfsync always), and still count: the bucket is
// short once its burst is spent, the slot taken until released.
func TestLimitsSkipTheAOF(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	l := s.Limits()
	buckets := []Bucket{{Key: l.BucketKey("server", "fx", "2"), PerMinute: 2, Burst: 2}}
	slot := &Slot{Key: l.SlotsKey("fx", 1), Max: 1, Lease: time.Minute, ID: "call-1"}
	before := aofSize(t, s)
	if refused, _, leased, err := l.TakeWithSlot(t.Context(), buckets, slot); err != nil || refused != -1 || !leased {
		t.Fatalf("TakeWithSlot = %d %v %v, want a token and the lease", refused, leased, err)
	}
	other := *slot
	other.ID = "call-2"
	if refused, _, leased, err := l.TakeWithSlot(t.Context(), buckets, &other); err != nil || refused != -1 || leased {
		t.Fatalf("second TakeWithSlot = %d %v %v, want a token and no lease (one slot)", refused, leased, err)
	}
	if refused, wait, err := l.Take(t.Context(), buckets); err != nil || refused != 0 || wait <= 0 {
		t.Fatalf("third Take = %d %s %v, want the bucket to refuse", refused, wait, err)
	}
	if err := l.Give(t.Context(), buckets); err != nil {
		t.Fatal(err)
	}
	l.Release(slot.Key, slot.ID, slot.Lease)
	if err := l.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if refused, _, leased, err := l.TakeWithSlot(t.Context(), buckets, &other); err != nil || refused != -1 || !leased {
		t.Fatalf("TakeWithSlot after a give and a release = %d %v %v, want a token and the lease", refused, leased, err)
	}
	if after := aofSize(t, s); after != before {
		t.Errorf("the limits appended %d bytes to the AOF, want none", after-before)
	}
}

// heldReleases is a store on a new redis-server whose releases wait on
// this replica: no background sender takes them (as while Redis does not
// answer).
func heldReleases(t *testing.T) *Store {
	t.Helper()
	s, _ := openRedis(t, redistest.Start(t))
	rl := s.redis.rel
	rl.mu.Lock()
	rl.started = true // no sender: releases wait
	rl.mu.Unlock()
	t.Cleanup(func() { close(rl.done) })
	return s
}

// TestNextTakeDropsWaitingRelease: a lease given back on this replica and
// not yet sent (the background sender is held here) is dropped by the
// next take of its slot on the replica, with the tokens or alone: a
// client that calls again once it has its answer finds its own last
// lease gone, with one slot.
func TestNextTakeDropsWaitingRelease(t *testing.T) {
	s := heldReleases(t)
	l := s.Limits()
	buckets := []Bucket{{Key: l.BucketKey("server", "fx", "100"), PerMinute: 100, Burst: 100}}
	slot := &Slot{Key: l.SlotsKey("fx", 1), Max: 1, Lease: time.Minute, ID: "call-1"}
	if _, _, leased, err := l.TakeWithSlot(t.Context(), buckets, slot); err != nil || !leased {
		t.Fatalf("TakeWithSlot = %v %v, want the lease", leased, err)
	}
	l.Release(slot.Key, slot.ID, slot.Lease)
	next := *slot
	next.ID = "call-2"
	if _, _, leased, err := l.TakeWithSlot(t.Context(), buckets, &next); err != nil || !leased {
		t.Fatalf("TakeWithSlot after call-1's release = %v %v, want the lease", leased, err)
	}
	l.Release(next.Key, next.ID, next.Lease)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := l.Acquire(ctx, slot.Key, 1, time.Minute, "call-3"); err != nil {
		t.Fatalf("Acquire after call-2's release = %v, want the lease", err)
	}
	if err := l.Settle(ctx); err != nil {
		t.Errorf("releases still waiting after the takes that dropped them: %v", err)
	}
	if got, err := s.Redis().Client().ZRange(t.Context(), slot.Key, 0, -1).Result(); err != nil || len(got) != 1 || got[0] != "call-3" {
		t.Errorf("leases held = %v (%v), want [call-3]", got, err)
	}
}

// TestEndedReleasesLeaveTheQueue: a release waiting on this replica (the
// sender is held, as while Redis does not take them) whose lease has
// ended is not carried by the next take of its slot (Redis dropped the
// lease itself) and leaves the queue; one whose lease lasts is carried.
func TestEndedReleasesLeaveTheQueue(t *testing.T) {
	s := heldReleases(t)
	rl, l := s.redis.rel, s.Limits()
	key := l.SlotsKey("fx", 2)
	const short = 20 * time.Millisecond
	l.Release(key, "short", short)
	l.Release(key, "long", time.Minute)
	time.Sleep(2 * short) // past the short lease's end
	if got := rl.pendingOf(key); len(got) != 1 || got[0] != "long" {
		t.Errorf("the next take carries %v, want [long]", got)
	}
	rl.mu.Lock()
	n := rl.count
	rl.mu.Unlock()
	if n != 1 {
		t.Errorf("%d releases wait, want 1", n)
	}
}

// lockedBuffer is a log a background goroutine writes to.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestReleaseQueueCapped: while Redis is down, releases queue up to
// maxPendingReleases; past it the oldest are dropped with a warning that
// names neither slot nor lease, and once Redis is back the rest are given
// back and a warning counts what was dropped.
func TestReleaseQueueCapped(t *testing.T) {
	srv := redistest.Start(t)
	var logs lockedBuffer
	s, err := Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "test:", EncryptionKey: testKey},
		Options{Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	l := s.Limits()
	key := l.SlotsKey("fx", 1)
	srv.Kill()
	const extra = 3
	for i := range maxPendingReleases + extra {
		l.Release(key, "call-"+strconv.Itoa(i), time.Minute)
	}
	got := map[string]bool{}
	for _, id := range s.redis.rel.pendingOf(key) {
		got[id] = true
	}
	if len(got) != maxPendingReleases {
		t.Errorf("%d releases wait, want %d", len(got), maxPendingReleases)
	}
	for i := range extra + 1 {
		id := "call-" + strconv.Itoa(i)
		if want := i >= extra; got[id] != want {
			t.Errorf("%s waiting = %v, want %v (the oldest are dropped)", id, got[id], want)
		}
	}
	if !strings.Contains(logs.String(), `"max":4096,"message":"too many max_concurrent slots wait to be given back; the oldest are dropped`) {
		t.Errorf("no warning of the dropped releases in %s", logs.String())
	}
	srv.Start()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.Settle(ctx); err != nil {
		t.Fatalf("Settle once Redis is back = %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, `"dropped":3,"message":"max_concurrent slots were dropped`) {
		t.Errorf("no count of the dropped releases in %s", out)
	}
	if strings.Contains(out, "call-") || strings.Contains(out, key) {
		t.Errorf("the log names a lease or a slot: %s", out)
	}
}
