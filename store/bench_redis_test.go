//go:build redis

package store

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// benchStore opens a Redis store on a redis-server of its own, with
// metrics, as the proxy runs it.
func benchStore(b *testing.B) *Store {
	b.Helper()
	srv := redistest.Start(b)
	m, err := metrics.NewStore(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "bench:", EncryptionKey: testKey}, Options{Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// cpuTime is the process's user and system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time the process (the client's side; Redis
// is another process) spent per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// benchSession is a session's fields as a client with a log level and an
// "always" approval leaves them.
var benchSession = map[string]string{"a": "dev", "ps": "", "pt": "0", "v": "2025-11-25", "c": "e", "i": "1", "l": "6", "w:fx__echo": "1"}

// BenchmarkSessionsLoad is the one round trip of a request on an HTTP
// session without limits whose copy is not current, one at a time.
func BenchmarkSessionsLoad(b *testing.B) {
	s := benchStore(b)
	ss := s.Sessions(time.Hour)
	ctx := context.Background()
	if err := ss.Create(ctx, "sid-bench", benchSession); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer reportCPU(b, cpuTime(b))
	for b.Loop() {
		if got, err := ss.Reload(ctx, "sid-bench"); err != nil || !got.Found() {
			b.Fatalf("Reload: %v %v", got, err)
		}
	}
}

// BenchmarkSessionsLoadParallel is BenchmarkSessionsLoad 8 at a time.
func BenchmarkSessionsLoadParallel(b *testing.B) {
	s := benchStore(b)
	ss := s.Sessions(time.Hour)
	ctx := context.Background()
	if err := ss.Create(ctx, "sid-bench", benchSession); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer reportCPU(b, cpuTime(b))
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if got, err := ss.Reload(ctx, "sid-bench"); err != nil || !got.Found() {
				b.Errorf("Reload: %v %v", got, err)
				return
			}
		}
	})
}

// BenchmarkSessionsLoadTaking is the round trip before a call under a
// per_minute and a max_concurrent limit (the take alone, once the
// session's copy is current), and the release after it (sent in the
// background, or with the next take).
func BenchmarkSessionsLoadTaking(b *testing.B) {
	s := benchStore(b)
	ss := s.Sessions(time.Hour)
	l := s.Limits()
	ctx := context.Background()
	if err := ss.Create(ctx, "sid-bench", benchSession); err != nil {
		b.Fatal(err)
	}
	buckets := []Bucket{{Key: l.BucketKey("agent", "dev", "1e8"), PerMinute: 100_000_000, Burst: 100_000_000}}
	slot := &Slot{Key: l.SlotsKey("fx", 64), Max: 64, Lease: time.Minute, ID: "0123456789abcdef0123456789abcdef"}
	b.ReportAllocs()
	defer reportCPU(b, cpuTime(b))
	for b.Loop() {
		got, took, err := ss.LoadTaking(ctx, "sid-bench", buckets, slot)
		if err != nil || !got.Found() || took.Refused >= 0 || !took.Leased {
			b.Fatalf("LoadTaking: %v %+v %v", got, took, err)
		}
		l.Release(slot.Key, slot.ID, slot.Lease)
	}
}
