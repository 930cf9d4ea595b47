package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// samples collects one side's latencies and the wall time they took, over
// every round, and the CPU time of the process in the proxy's place.
type samples struct {
	lat  []time.Duration
	wall time.Duration
	// cpu is the CPU time the side's process used during the measured
	// batches; hasCPU says it was read (a direct side has no such process).
	cpu    time.Duration
	hasCPU bool
	// extraCPU is the CPU time of the side's helper process (the OTLP sink
	// of a proxy that traces), when it has one.
	extraCPU    time.Duration
	hasExtraCPU bool
}

// add records one round.
func (s *samples) add(lat []time.Duration, wall time.Duration) {
	s.lat = append(s.lat, lat...)
	s.wall += wall
}

// summary is what the report shows for one side. Times are milliseconds.
type summary struct {
	N      int     `json:"n"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	// RPS is completed requests per second of wall time; zero (left out)
	// where a rate means nothing (cold starts, memory).
	RPS float64 `json:"rps,omitempty"`
	// PeakRSSMB is VmHWM in MiB, for the memory scenario.
	PeakRSSMB float64 `json:"peak_rss_mb,omitempty"`
	// CPUus is the CPU time (user + system) of the process in the proxy's
	// place per request, in microseconds; nil for a direct side. It is read
	// in clock ticks (10 ms), so it is exact to 10 ms / N.
	CPUus *float64 `json:"cpu_per_call_us,omitempty"`
	// Sessions is how many sessions were open at once (sessions-http).
	Sessions int `json:"sessions,omitempty"`
	// SinkCPUus is the CPU time of the side's OTLP sink per request, in
	// microseconds, for a proxy that traces (the feature scenarios).
	SinkCPUus *float64 `json:"sink_cpu_per_call_us,omitempty"`
}

// summarize computes percentiles (nearest rank), the mean and, when
// withRate, the throughput over the summed wall time.
func (s *samples) summarize(withRate bool) summary {
	out := summary{N: len(s.lat)}
	if len(s.lat) == 0 {
		return out
	}
	sorted := slices.Clone(s.lat)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	out.P50ms = ms(percentile(sorted, 50))
	out.P99ms = ms(percentile(sorted, 99))
	out.MeanMs = ms(sum / time.Duration(len(sorted)))
	if withRate && s.wall > 0 {
		out.RPS = float64(len(sorted)) / s.wall.Seconds()
	}
	if s.hasCPU {
		us := float64(s.cpu) / float64(time.Microsecond) / float64(len(sorted))
		out.CPUus = &us
	}
	if s.hasExtraCPU {
		us := float64(s.extraCPU) / float64(time.Microsecond) / float64(len(sorted))
		out.SinkCPUus = &us
	}
	return out
}

// percentile is the nearest-rank percentile p (0 < p <= 100) of sorted,
// which must not be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mib converts bytes to MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// runOps runs op n times with conc workers (each runs one op at a time, so
// conc ops are in flight) and returns every op's latency and the wall time
// of the batch. The first error stops the batch; ctx bounds it.
func runOps(ctx context.Context, op func(context.Context, int) error, n, conc int) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					cancel(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return nil, 0, err
	}
	return lat, wall, nil
}
