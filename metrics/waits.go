package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Requests that found their upstream not connected and waited for it: its
// first connection, or its reconnection within reconnect_wait (docs/operations.md#reconnection).

// waitBuckets span a request released at once to the longest wait allowed
// (reconnect_wait is at most 600 s; the default is 5 s).
var waitBuckets = []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2, 3, 5, 10, 30, 60, 120, 600}

type waitMetrics struct {
	waited   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newWaitMetrics(reg prometheus.Registerer) (*waitMetrics, error) {
	w := &waitMetrics{
		waited:   spec{Name: "mcp_proxy_requests_waited_total", Labels: []string{"server", "outcome"}, Help: "Requests that found their upstream server not connected and waited for its connection (first connection, or reconnection within reconnect_wait), by server and outcome (sent, timeout, canceled, failed, overflow)."}.counter(),
		duration: spec{Name: "mcp_proxy_request_wait_seconds", Labels: []string{"server"}, Help: "How long requests waited for their upstream server's connection, by server (overflow refusals did not wait and are not observed)."}.histogram(waitBuckets),
	}
	if err := register(reg, w.waited, w.duration); err != nil {
		return nil, err
	}
	return w, nil
}

// RequestWaited records the end of one request's wait for server's
// connection; outcome is "sent", "timeout", "canceled", "failed" or
// "overflow" (upstream.Wait*).
func (m *Metrics) RequestWaited(server, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.waits.waited.WithLabelValues(server, outcome).Inc()
	if outcome != "overflow" {
		m.waits.duration.WithLabelValues(server).Observe(d.Seconds())
	}
}

// forget drops the series of a server removed from the config.
func (w *waitMetrics) forget(server string) {
	w.waited.DeletePartialMatch(prometheus.Labels{"server": server})
	w.duration.DeleteLabelValues(server)
}
