package status

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// clock is a settable clock for Window.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestWindow(t *testing.T) (*Window, *metrics.Metrics, *clock) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	return NewWindow(reg, c.now), m, c
}

// tick advances the clock by one interval and samples.
func (c *clock) tick(t *testing.T, w *Window) {
	t.Helper()
	c.t = c.t.Add(SampleInterval)
	if err := w.Sample(); err != nil {
		t.Fatal(err)
	}
}

// TestWindowCounts: calls before the oldest sample do not count, denied
// calls are neither calls nor errors, error and timeout are errors and
// tool_error is counted apart; sessions are the gauge at the newest
// sample; denials are given over the window and since start; once the
// ring has turned, calls older than five minutes leave the figures.
func TestWindowCounts(t *testing.T) {
	w, m, c := newTestWindow(t)
	if f := w.Figures(); f.Span != 0 || len(f.Servers) != 0 || f.Sessions != nil {
		t.Fatalf("figures before any sample: %+v", f)
	}
	for range 5 {
		m.ToolCall("fx", "echo", "ok", time.Millisecond)
	}
	m.PolicyDenial("dev", "excluded_tools")
	m.SessionOpened("dev", "http")
	if err := w.Sample(); err != nil {
		t.Fatal(err)
	}
	f := w.Figures()
	if f.Span != 0 || len(f.Servers) != 0 {
		t.Errorf("one sample: span %v, servers %v", f.Span, f.Servers)
	}
	if len(f.Denials) != 1 || f.Denials[0] != (DenialCount{Agent: "dev", Rule: "excluded_tools", Total: 1}) {
		t.Errorf("denials after one sample: %+v", f.Denials)
	}

	for _, o := range []string{"ok", "ok", "ok", "error", "timeout", "tool_error", "canceled", "denied", "denied"} {
		m.ToolCall("fx", "echo", o, 20*time.Millisecond)
	}
	m.ToolCall("web", "fetch", "ok", time.Second)
	m.PolicyDenial("dev", "excluded_tools")
	m.PolicyDenial("ops", "read_only")
	m.SessionOpened("dev", "http")
	m.SessionOpened("ops", "stdio")
	m.SessionClosed("ops", "stdio")
	c.tick(t, w)
	f = w.Figures()
	if f.Span != SampleInterval {
		t.Errorf("span %v", f.Span)
	}
	if got, want := f.Servers["fx"], (ServerFigures{Calls: 7, Errors: 2, ToolErrors: 1}); got.Calls != want.Calls || got.Errors != want.Errors || got.ToolErrors != want.ToolErrors || !got.HasP95 {
		t.Errorf("fx figures %+v, want %+v with a p95", got, want)
	}
	if got := f.Servers["web"]; got.Calls != 1 || got.Errors != 0 {
		t.Errorf("web figures %+v", got)
	}
	wantSessions := []SessionCount{{Agent: "dev", Transport: "http", Open: 2}}
	if len(f.Sessions) != 1 || f.Sessions[0] != wantSessions[0] {
		t.Errorf("sessions %+v, want %+v (closed ones left out)", f.Sessions, wantSessions)
	}
	wantDenials := []DenialCount{{Agent: "dev", Rule: "excluded_tools", InWindow: 1, Total: 2}, {Agent: "ops", Rule: "read_only", InWindow: 1, Total: 1}}
	if len(f.Denials) != 2 || f.Denials[0] != wantDenials[0] || f.Denials[1] != wantDenials[1] {
		t.Errorf("denials %+v, want %+v", f.Denials, wantDenials)
	}

	// 29 quiet samples: the ring holds 31, the calls are still inside.
	for range 29 {
		c.tick(t, w)
	}
	if f := w.Figures(); f.Span != 5*time.Minute || f.Servers["fx"].Calls != 7 {
		t.Fatalf("after five minutes: span %v, fx %+v", f.Span, f.Servers["fx"])
	}
	// One more: the sample before the calls leaves the ring, and they with it.
	c.tick(t, w)
	f = w.Figures()
	if f.Span != 5*time.Minute || f.Servers["fx"].Calls != 0 || f.Servers["fx"].HasP95 || f.Denials[0].InWindow != 0 || f.Denials[0].Total != 2 {
		t.Errorf("past five minutes: span %v, fx %+v, denials %+v", f.Span, f.Servers["fx"], f.Denials)
	}
}

// TestWindowP95: the 95th percentile of the calls in the window, from the
// histogram's bucket deltas, interpolated like histogram_quantile; calls
// before the window do not move it.
func TestWindowP95(t *testing.T) {
	tests := []struct {
		name    string
		before  map[time.Duration]int // observed before the first sample
		observe map[time.Duration]int
		want    time.Duration
	}{
		{"one bucket", nil, map[time.Duration]int{3 * time.Millisecond: 100}, 4875 * time.Microsecond},
		{"tail", nil, map[time.Duration]int{800 * time.Microsecond: 90, 200 * time.Millisecond: 10}, 175 * time.Millisecond},
		{"slow calls before the window", map[time.Duration]int{100 * time.Second: 1000}, map[time.Duration]int{3 * time.Millisecond: 100}, 4875 * time.Microsecond},
		{"beyond the last bucket", nil, map[time.Duration]int{1000 * time.Second: 100}, 600 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, m, c := newTestWindow(t)
			for d, n := range tc.before {
				for range n {
					m.ToolCall("fx", "echo", "ok", d)
				}
			}
			if err := w.Sample(); err != nil {
				t.Fatal(err)
			}
			for d, n := range tc.observe {
				for range n {
					m.ToolCall("fx", "echo", "ok", d)
				}
			}
			m.ToolCall("fx", "echo", "denied", time.Hour) // never in the latency
			c.tick(t, w)
			got := w.Figures().Servers["fx"]
			if !got.HasP95 || (got.P95-tc.want).Abs() > time.Microsecond {
				t.Errorf("p95 = %v (ok %v), want %v", got.P95, got.HasP95, tc.want)
			}
		})
	}
}

// TestWindowReset: a counter or histogram that went down between two
// samples was reset; what it holds now is what happened since.
func TestWindowReset(t *testing.T) {
	calls, bucket := 10.0, uint64(10)
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		labels := []*dto.LabelPair{{Name: proto.String("server"), Value: proto.String("fx")}, {Name: proto.String("outcome"), Value: proto.String("ok")}}
		return []*dto.MetricFamily{
			{Name: proto.String(metrics.NameToolCalls), Type: dto.MetricType_COUNTER.Enum(), Metric: []*dto.Metric{{Label: labels, Counter: &dto.Counter{Value: proto.Float64(calls)}}}},
			{Name: proto.String(metrics.NameToolCallDuration), Type: dto.MetricType_HISTOGRAM.Enum(), Metric: []*dto.Metric{{Label: labels, Histogram: &dto.Histogram{
				SampleCount: proto.Uint64(bucket),
				Bucket: []*dto.Bucket{
					{UpperBound: proto.Float64(1), CumulativeCount: proto.Uint64(bucket)},
					{UpperBound: proto.Float64(math.Inf(1)), CumulativeCount: proto.Uint64(bucket)},
				},
			}}}},
		}, nil
	})
	c := &clock{t: time.Unix(0, 0)}
	w := NewWindow(g, c.now)
	_ = w.Sample()
	calls, bucket = 4, 4
	c.tick(t, w)
	if f := w.Figures().Servers["fx"]; f.Calls != 4 || !f.HasP95 || f.P95 != 950*time.Millisecond {
		t.Errorf("after a reset: %+v, want 4 calls, p95 0.95s", f)
	}
}

// TestQuantile covers histogram.quantile's edges.
func TestQuantile(t *testing.T) {
	tests := []struct {
		name string
		h    histogram
		want float64
		ok   bool
	}{
		{"empty", histogram{bounds: []float64{1}, counts: []float64{0}}, 0, false},
		{"no finite buckets", histogram{count: 3}, 0, false},
		{"first bucket from zero", histogram{bounds: []float64{2, 4}, counts: []float64{10, 10}, count: 10}, 1.9, true},
		{"non-positive first bound", histogram{bounds: []float64{0, 4}, counts: []float64{10, 10}, count: 10}, 0, true},
		{"rank at a bucket's top", histogram{bounds: []float64{1, 2}, counts: []float64{95, 100}, count: 100}, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.h.quantile(0.95)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("quantile = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
