//go:build redis

package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestNextTakeDropsWaitingRelease: a lease given back on this replica and
// not yet sent (the background sender is held here) is dropped by the
// next take of its slot on the replica, with the tokens or alone: a
// client that calls again once it has its answer finds its own last
// lease gone, with one slot.
func TestNextTakeDropsWaitingRelease(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	rl := s.redis.rel
	rl.mu.Lock()
	rl.started = true // no sender: releases wait
	rl.mu.Unlock()
	t.Cleanup(func() { close(rl.done) })
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
