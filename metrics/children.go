package metrics

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// labelKey is the label values of one series of a counter of
// Metrics.count, padded with "" (every such counter has at most three
// labels).
type labelKey [3]string

// childCache maps the label values of a counter's series to the series,
// so that counting on a series seen before costs a map lookup without a
// lock, instead of the collector's label hashing under its lock. It holds
// an entry only for a series the collector holds, and those collectors
// never delete a series: it is as bounded as the exposition
// (docs/operations.md#metrics) and never holds a series the collector no
// longer exposes. The map is copied on write: a new series is rare (its
// label values are configured names and fixed sets), a count is not.
type childCache struct {
	mu   sync.Mutex // serializes writers
	seen atomic.Pointer[map[labelKey]prometheus.Counter]
}

// get returns the series of vec whose label values are labels (k is
// labels padded), resolving it through vec the first time.
func (c *childCache) get(k labelKey, vec *prometheus.CounterVec, labels []string) prometheus.Counter {
	if m := c.seen.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			return s
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.seen.Load()
	if old != nil {
		if s, ok := (*old)[k]; ok {
			return s
		}
	}
	s := vec.WithLabelValues(labels...)
	next := make(map[labelKey]prometheus.Counter, 1)
	if old != nil {
		next = maps.Clone(*old)
	}
	next[k] = s
	c.seen.Store(&next)
	return s
}
