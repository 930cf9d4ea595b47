package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioPingFloodBounded is issue 12, item 8: a stdio upstream that sends
// 20,000 pings and never reads its stdin grows the proxy by a bounded number
// of goroutines and little memory (before: 18,485 goroutines and 96 MB), and
// another server keeps answering meanwhile. The proxy's own figures come from
// its /metrics (go_goroutines, process_resident_memory_bytes). The idle
// figures are the peaks of the same sampling (scrapes and calls to the other
// server) before the flood, so that what the measuring costs (a lot under
// the race detector) is not counted as the flood's.
func TestStdioPingFloodBounded(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "blobs: {mode: passthrough}\nmetrics: {listen: 127.0.0.1:0}\n",
		fixtureServer("fx", []string{"-no-weird"}),
		fixtureServer("flood", []string{"-no-weird", "-ping-flood", "20000"}))
	cs, stderr := sdkStdioProxy(t, cfg, nil, nil)
	metricsURL := sfMetricsURL(t, stderr)
	names := toolNames(listTools(t, cs))
	if !hasName(names, "fx__echo") || !hasName(names, "flood__echo") {
		t.Fatalf("tools: %v", names)
	}

	// sample scrapes /metrics every 100 ms and calls the other server every
	// 500 ms, for d; it returns the peaks and the slowest call.
	sample := func(d time.Duration) (goroutines, rss float64, slowest time.Duration) {
		for i, start := 0, time.Now(); time.Since(start) < d; i++ {
			goroutines = max(goroutines, sfMetric(t, metricsURL, "go_goroutines"))
			rss = max(rss, sfMetric(t, metricsURL, "process_resident_memory_bytes"))
			if i%5 == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				t0 := time.Now()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "still here"}})
				cancel()
				if err != nil || res.IsError || contentText(res) != "still here" {
					t.Fatalf("fx__echo: %v %v", err, res)
				}
				slowest = max(slowest, time.Since(t0))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if goroutines <= 0 || rss <= 0 {
			t.Fatalf("no go_goroutines (%v) or process_resident_memory_bytes (%v) on /metrics", goroutines, rss)
		}
		return goroutines, rss, slowest
	}
	idleG, idleRSS, _ := sample(4 * time.Second)

	callTool(t, cs, "flood__echo", map[string]any{"text": "start the flood"})
	peakG, peakRSS, slowest := sample(6 * time.Second)
	if !strings.Contains(stderr.String(), "ping flood: sending 20000 pings") {
		t.Fatalf("the fixture never started its flood:\n%s", tail(stderr.String(), 3000))
	}
	t.Logf("goroutines: idle %.0f, flood %.0f; RSS: idle %.1f MB, flood %.1f MB; slowest fx__echo during the flood %s",
		idleG, peakG, idleRSS/(1<<20), peakRSS/(1<<20), slowest)
	if peakG-idleG > 200 {
		t.Errorf("goroutines peaked at %.0f, %.0f above the %.0f before the flood (bound: 200)", peakG, peakG-idleG, idleG)
	}
	if grown := peakRSS - idleRSS; grown >= 20<<20 {
		t.Errorf("RSS grew by %.1f MB during the flood (bound: 20 MB)", grown/(1<<20))
	}
	if slowest > 2*time.Second {
		t.Errorf("the other server slowed to %s a call during the flood", slowest)
	}
}
