package metrics

import (
	"testing"
	"time"
)

// BenchmarkCallPath records what one tool call records on its way through
// the proxy: the request counter, the tool call counter and latency, and
// the listener's authentication counter.
func BenchmarkCallPath(b *testing.B) {
	m, err := New(NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ts := new(ToolSeries) // what a catalog entry holds
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Auth("assistant", "ok")
			m.Request("assistant", "tools/call", "ok")
			m.ToolCallOf(ts, "echo", "echo", OutcomeOK, 3*time.Millisecond)
		}
	})
}
