package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStoreMetrics: what a scrape shows after two operations and a change
// of the up gauge; a nil *Store records nothing and does not panic.
func TestStoreMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := NewStore(reg)
	if err != nil {
		t.Fatal(err)
	}
	s.Up(true)
	s.Request("session_get", StoreOK, 300*time.Microsecond)
	s.Request("session_get", StoreUnavailable, time.Second)
	s.Up(false)
	want := `
# HELP mcp_proxy_store_requests_total Requests to the shared-state store by operation and outcome (ok, error, unavailable).
# TYPE mcp_proxy_store_requests_total counter
mcp_proxy_store_requests_total{op="session_get",outcome="ok"} 1
mcp_proxy_store_requests_total{op="session_get",outcome="unavailable"} 1
# HELP mcp_proxy_store_up 1 while the shared-state store answers, else 0; always 1 with the memory store.
# TYPE mcp_proxy_store_up gauge
mcp_proxy_store_up 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcp_proxy_store_requests_total", "mcp_proxy_store_up"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "mcp_proxy_store_latency_seconds"); n != 1 {
		t.Errorf("latency series = %d, want 1", n)
	}
	var none *Store
	none.Request("x", StoreOK, 0)
	none.Up(true)
}
