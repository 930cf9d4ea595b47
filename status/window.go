package status

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcp-proxy/mcp-proxy/metrics"
)

const (
	// SampleInterval is how often the Window reads the proxy's metrics.
	SampleInterval = 10 * time.Second
	// ringSize samples span 30 intervals: the five minutes of "the last 5
	// minutes" between the oldest and the newest.
	ringSize = 31
)

// pair is a two-label key: (server, outcome), (agent, transport) or
// (agent, rule).
type pair [2]string

// sample is what one read of the registry found.
type sample struct {
	at       time.Time
	calls    map[pair]float64      // (server, outcome), summed over tools
	latency  map[string]*histogram // by server, over every outcome but denied
	sessions map[pair]float64      // (agent, transport): a gauge
	denials  map[pair]float64      // (agent, rule)
}

// histogram is a cumulative histogram: counts[i] observations at or below
// bounds[i] (finite, ascending), count in all.
type histogram struct {
	bounds []float64
	counts []float64
	count  float64
}

// Window keeps a ring of samples of the proxy's own metrics, one every
// SampleInterval, and computes the page's "last 5 minutes" figures as the
// difference between the newest sample and the oldest one in the ring
// (not from the counters since start). It is safe for concurrent use.
type Window struct {
	g   prometheus.Gatherer
	now func() time.Time

	mu   sync.Mutex
	ring [ringSize]*sample
	n    int // samples held, at most ringSize
	next int // where the next sample goes
}

// NewWindow returns a Window over g. now is its clock; nil means
// time.Now.
func NewWindow(g prometheus.Gatherer, now func() time.Time) *Window {
	if now == nil {
		now = time.Now
	}
	return &Window{g: g, now: now}
}

// Run samples at once and then every SampleInterval until ctx ends. Its
// caller owns the goroutine.
func (w *Window) Run(ctx context.Context) {
	t := time.NewTicker(SampleInterval)
	defer t.Stop()
	for {
		_ = w.Sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample reads the registry once and adds the result to the ring, dropping
// the oldest sample when the ring is full. A registry that fails to gather
// keeps what it did return (client_golang returns the rest) and reports
// the error.
func (w *Window) Sample() error {
	families, err := w.g.Gather()
	s := &sample{at: w.now(), calls: map[pair]float64{}, latency: map[string]*histogram{},
		sessions: map[pair]float64{}, denials: map[pair]float64{}}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() { // the metrics of docs/operations.md#metrics the page shows
			case metrics.NameToolCalls:
				s.calls[pair{label(m, "server"), label(m, "outcome")}] += m.GetCounter().GetValue()
			case metrics.NameToolCallDuration:
				if label(m, "outcome") != metrics.OutcomeDenied {
					s.addLatency(label(m, "server"), m.GetHistogram())
				}
			case metrics.NameSessionsActive:
				s.sessions[pair{label(m, "agent"), label(m, "transport")}] += m.GetGauge().GetValue()
			case metrics.NamePolicyDenials:
				s.denials[pair{label(m, "agent"), label(m, "rule")}] += m.GetCounter().GetValue()
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ring[w.next] = s
	w.next = (w.next + 1) % ringSize
	w.n = min(w.n+1, ringSize)
	return err
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// addLatency adds one series of the duration histogram to server's sum.
// Series of one histogram share their buckets; a series with other bounds
// (which the metrics package never makes) is left out rather than mixed.
func (s *sample) addLatency(server string, h *dto.Histogram) {
	var bounds, counts []float64
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), +1) {
			continue
		}
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, float64(b.GetCumulativeCount()))
	}
	sum := s.latency[server]
	if sum == nil {
		s.latency[server] = &histogram{bounds: bounds, counts: counts, count: float64(h.GetSampleCount())}
		return
	}
	if !slices.Equal(sum.bounds, bounds) {
		return
	}
	for i := range counts {
		sum.counts[i] += counts[i]
	}
	sum.count += float64(h.GetSampleCount())
}

// Figures are the Window's figures at its newest sample.
type Figures struct {
	// Span is how far back the window reaches: the newest sample minus the
	// oldest, five minutes once the ring is full; 0 with fewer than two
	// samples, when there are no window figures yet.
	Span time.Duration
	// Servers are the call figures by server, over Span.
	Servers map[string]ServerFigures
	// Sessions are the open downstream sessions at the newest sample, by agent
	// and transport (those with at least one), sorted.
	Sessions []SessionCount
	// Denials are the policy denials by agent and rule (those with at
	// least one since start), sorted: over Span and since start.
	Denials []DenialCount
}

// ServerFigures are one server's tool calls over the window.
type ServerFigures struct {
	// Calls are the calls that reached the server's call path (every
	// outcome but denied); Errors those that failed on the way (error,
	// timeout); ToolErrors those whose result had isError (tool_error).
	Calls, Errors, ToolErrors int64
	// P95 is the 95th percentile latency of Calls, interpolated within
	// the histogram bucket it falls in as Prometheus's histogram_quantile
	// does; HasP95 is false when there were no calls.
	P95    time.Duration
	HasP95 bool
}

// SessionCount is the number of open sessions of an agent on a transport.
type SessionCount struct {
	Agent, Transport string
	Open             int64
}

// DenialCount is the policy denials of an agent by one rule.
type DenialCount struct {
	Agent, Rule string
	// InWindow counts those within the window's span, Total those since
	// the proxy started.
	InWindow, Total int64
}

// Figures computes the figures between the oldest and the newest sample.
// A counter that went down between them was reset (a series deleted and
// made again): its newest value is what happened since.
func (w *Window) Figures() Figures {
	w.mu.Lock()
	var oldest, newest *sample
	if w.n > 0 {
		newest = w.ring[(w.next-1+ringSize)%ringSize]
		oldest = w.ring[(w.next-w.n+ringSize)%ringSize]
	}
	w.mu.Unlock()
	f := Figures{Servers: map[string]ServerFigures{}}
	if newest == nil {
		return f
	}
	for k, v := range newest.sessions {
		if v > 0 {
			f.Sessions = append(f.Sessions, SessionCount{Agent: k[0], Transport: k[1], Open: int64(math.Round(v))})
		}
	}
	sort.Slice(f.Sessions, func(i, j int) bool {
		return lessPair(f.Sessions[i].Agent, f.Sessions[i].Transport, f.Sessions[j].Agent, f.Sessions[j].Transport)
	})
	if oldest == newest {
		for k, v := range newest.denials {
			if v > 0 {
				f.Denials = append(f.Denials, DenialCount{Agent: k[0], Rule: k[1], Total: int64(v)})
			}
		}
		sortDenials(f.Denials)
		return f
	}
	f.Span = newest.at.Sub(oldest.at)
	for k, v := range newest.denials {
		if v > 0 {
			f.Denials = append(f.Denials, DenialCount{Agent: k[0], Rule: k[1], InWindow: int64(delta(v, oldest.denials[k])), Total: int64(v)})
		}
	}
	sortDenials(f.Denials)
	for k, v := range newest.calls {
		d := int64(delta(v, oldest.calls[k]))
		sf := f.Servers[k[0]]
		// A denied call never reached its server, so it is neither a call
		// nor in the latency; error and timeout are the routing failures
		// (the dashboard's error ratio); tool_error is the tool's own
		// failure.
		switch k[1] {
		case metrics.OutcomeDenied:
			continue
		case metrics.OutcomeError, metrics.OutcomeTimeout:
			sf.Errors += d
		case metrics.OutcomeToolError:
			sf.ToolErrors += d
		}
		sf.Calls += d
		f.Servers[k[0]] = sf
	}
	for server, h := range newest.latency {
		if q, ok := h.since(oldest.latency[server]).quantile(0.95); ok {
			sf := f.Servers[server]
			sf.P95, sf.HasP95 = time.Duration(q*float64(time.Second)), true
			f.Servers[server] = sf
		}
	}
	return f
}

func lessPair(a0, a1, b0, b1 string) bool {
	if a0 != b0 {
		return a0 < b0
	}
	return a1 < b1
}

func sortDenials(d []DenialCount) {
	sort.Slice(d, func(i, j int) bool { return lessPair(d[i].Agent, d[i].Rule, d[j].Agent, d[j].Rule) })
}

// delta is a counter's increase from old to cur; a counter that went down
// was reset, and cur is its increase since.
func delta(cur, old float64) float64 {
	if cur < old {
		return cur
	}
	return cur - old
}

// since is h minus old (nil: nothing before), bucket by bucket; a count
// that went down means a reset, and h is taken whole.
func (h *histogram) since(old *histogram) *histogram {
	if old == nil || !slices.Equal(h.bounds, old.bounds) || h.count < old.count {
		return h
	}
	d := &histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), count: h.count - old.count}
	for i := range h.counts {
		d.counts[i] = h.counts[i] - old.counts[i]
		if d.counts[i] < 0 {
			return h
		}
	}
	return d
}

// quantile estimates the q-quantile (0 < q < 1) as histogram_quantile
// does: find the bucket holding rank q·count and interpolate linearly
// between its lower and upper bound (the first bucket's lower bound is 0);
// a rank beyond the last finite bucket gives that bucket's upper bound.
// ok is false without observations.
func (h *histogram) quantile(q float64) (float64, bool) {
	if h.count <= 0 {
		return 0, false
	}
	rank := q * h.count
	prevBound, prevCount := 0.0, 0.0
	for i, bound := range h.bounds {
		if h.counts[i] >= rank {
			if i == 0 && bound <= 0 {
				return bound, true
			}
			in := h.counts[i] - prevCount
			if in <= 0 {
				return bound, true
			}
			return prevBound + (bound-prevBound)*(rank-prevCount)/in, true
		}
		prevBound, prevCount = bound, h.counts[i]
	}
	if len(h.bounds) == 0 {
		return 0, false
	}
	return h.bounds[len(h.bounds)-1], true
}
