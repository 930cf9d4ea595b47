package metrics

import "github.com/prometheus/client_golang/prometheus"

// The limits of docs/agents.md#overrides-and-rate-limits, the values of the limit label of
// mcp_proxy_rate_limited_total.
const (
	LimitServerRate       = "server_rate"
	LimitServerConcurrent = "server_concurrent"
	LimitAgent            = "agent"
)

// newRateLimited is mcp_proxy_rate_limited_total{agent,server,limit}.
func newRateLimited() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_proxy_rate_limited_total",
		Help: "Tool calls refused by a rate limit and never sent upstream, by agent, server and limit (server_rate, server_concurrent, agent).",
	}, []string{"agent", "server", "limit"})
}

// RateLimited counts one call a rate limit refused; limit is one of the
// Limit constants.
func (m *Metrics) RateLimited(agent, server, limit string) {
	if m == nil {
		return
	}
	m.rateLimited.WithLabelValues(agent, server, limit).Inc()
}
