package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Store outcomes, the values of the outcome label of
// mcp_proxy_store_requests_total.
const (
	// StoreOK: the store answered.
	StoreOK = "ok"
	// StoreError: the store answered with an error (a script refused, a
	// wrong type).
	StoreError = "error"
	// StoreUnavailable: no answer in time, or no connection.
	StoreUnavailable = "unavailable"
)

// storeLatencyBuckets span a local Redis (100 us) to the 1 s within which a
// request that needs the store fails when it does not answer
// (docs/shared-state.md).
var storeLatencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Store holds the collectors of the shared-state store (docs/shared-state.md).
// A nil *Store records nothing. Its methods are safe for concurrent use.
type Store struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	up       prometheus.Gauge
}

// NewStore creates the store's collectors and registers them on reg:
// mcp_proxy_store_requests_total{op,outcome},
// mcp_proxy_store_latency_seconds{op} and mcp_proxy_store_up.
func NewStore(reg prometheus.Registerer) (*Store, error) {
	s := &Store{
		requests: spec{Name: "mcp_proxy_store_requests_total", Labels: []string{"op", "outcome"}, Help: "Requests to the shared-state store by operation and outcome (ok, error, unavailable)."}.counter(),
		latency:  spec{Name: "mcp_proxy_store_latency_seconds", Labels: []string{"op"}, Help: "Time the shared-state store took to answer, by operation."}.histogram(storeLatencyBuckets),
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcp_proxy_store_up",
			Help: "1 while the shared-state store answers, else 0; always 1 with the memory store.",
		}),
	}
	if err := register(reg, s.requests, s.latency, s.up); err != nil {
		return nil, err
	}
	return s, nil
}

// Request records one operation: op is a fixed name chosen by the code
// (never a key), outcome one of the Store outcomes.
func (s *Store) Request(op, outcome string, took time.Duration) {
	if s == nil {
		return
	}
	s.requests.WithLabelValues(op, outcome).Inc()
	s.latency.WithLabelValues(op).Observe(took.Seconds())
}

// Up records whether the store answers.
func (s *Store) Up(up bool) {
	if s == nil {
		return
	}
	s.up.Set(gaugeValue(up))
}
