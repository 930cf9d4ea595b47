package metrics

// The limits of docs/agents.md#overrides-and-rate-limits, the values of the limit label of
// mcp_proxy_rate_limited_total.
const (
	LimitServerRate       = "server_rate"
	LimitServerConcurrent = "server_concurrent"
	LimitAgent            = "agent"
)

// RateLimited counts one call a rate limit refused; limit is one of the
// Limit constants.
func (m *Metrics) RateLimited(agent, server, limit string) {
	m.count(rateLimited, agent, server, limit)
}
