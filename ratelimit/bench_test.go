package ratelimit

import (
	"context"
	"testing"
	"time"
)

// BenchmarkSlotsFree is a call of a server with max_concurrent that finds
// a slot free: what every such call pays.
func BenchmarkSlotsFree(b *testing.B) {
	s := NewSlots(4)
	for b.Loop() {
		if !s.TryAcquire() {
			b.Fatal("no free slot")
		}
		s.Release()
	}
}

// BenchmarkSlotsContended is calls from many goroutines through two slots,
// most of them waiting in line.
func BenchmarkSlotsContended(b *testing.B) {
	s := NewSlots(2)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !s.TryAcquire() {
				if err := s.Acquire(ctx); err != nil {
					b.Error(err)
					return
				}
			}
			s.Release()
		}
	})
}

// BenchmarkBucketTake is a call under a per_minute limit that has tokens.
func BenchmarkBucketTake(b *testing.B) {
	t0 := time.Unix(1000, 0)
	bk := NewBucket(60, 1<<30, t0)
	now := t0
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if ok, _ := bk.Take(now); !ok {
			b.Fatal("refused")
		}
	}
}
