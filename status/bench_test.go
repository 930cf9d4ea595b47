package status

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// BenchmarkWindowSample is one of the status page's samples of the proxy's
// metrics, taken every SampleInterval whether or not anyone looks, over 20
// servers of 10 tools that each had calls of two outcomes, 4 agents'
// sessions and denials: what the status page costs a busy proxy apart from
// its requests (docs/performance.md).
func BenchmarkWindowSample(b *testing.B) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		b.Fatal(err)
	}
	for s := range 20 {
		server := "server" + strconv.Itoa(s)
		for t := range 10 {
			tool := "tool" + strconv.Itoa(t)
			m.ToolCall(server, tool, metrics.OutcomeOK, time.Millisecond)
			m.ToolCall(server, tool, metrics.OutcomeToolError, 3*time.Millisecond)
		}
	}
	for a := range 4 {
		agent := "agent" + strconv.Itoa(a)
		m.SessionOpened(agent, "http")
		m.PolicyDenial(agent, "excluded_tools")
	}
	w := NewWindow(reg, nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Sample(); err != nil {
			b.Fatal(err)
		}
	}
}
