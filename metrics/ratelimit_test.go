package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRateLimited(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.RateLimited("bot", "github", LimitAgent)
	m.RateLimited("bot", "github", LimitAgent)
	m.RateLimited("default", "fx", LimitServerConcurrent)
	want := `
# HELP mcp_proxy_rate_limited_total Tool calls refused by a rate limit and never sent upstream, by agent, server and limit (server_rate, server_concurrent, agent).
# TYPE mcp_proxy_rate_limited_total counter
mcp_proxy_rate_limited_total{agent="bot",limit="agent",server="github"} 2
mcp_proxy_rate_limited_total{agent="default",limit="server_concurrent",server="fx"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcp_proxy_rate_limited_total"); err != nil {
		t.Error(err)
	}
	var none *Metrics
	none.RateLimited("a", "b", LimitServerRate)
}
