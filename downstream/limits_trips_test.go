//go:build redis

package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/store"
)

const tripsYAML = `
servers:
  fx: {command: fixture, timeout: 5s, limits: {per_minute: 1000, max_concurrent: 1}}
bundles:
  all: {servers: [fx]}
agents:
  bot:
    mcp_bundles: [all]
    limits: [{tools: ["*"], per_minute: 1000}]
default_agent: bot
`

// TestLimitedCallRoundTrips: with a Redis store, a call under a per_minute
// and a max_concurrent limit costs one round trip before it runs (the
// tokens and the slot's lease in one script) and one after (the release);
// the lease is held while the call runs upstream.
func TestLimitedCallRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewRegistry()
	m, err := metrics.NewStore(reg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "mcp-proxy:", EncryptionKey: testStoreKey},
		store.Options{Logger: zerolog.Nop(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	slots := st.Limits().SlotsKey("fx", 1)
	held := make(chan int64, 3)
	fx := connected(`{"name":"alpha","inputSchema":{"type":"object"}}`)
	fx.RequestFn = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		n, err := st.Redis().Client().ZCard(ctx, slots).Result()
		if err != nil {
			return nil, err
		}
		held <- n
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
	}
	p := New(Options{Config: parseConfig(t, tripsYAML), Upstreams: map[string]Upstream{"fx": fx},
		Logger: zerolog.Nop(), Version: "test", Store: st})
	p.Refresh()
	const calls = 3
	for i := range calls {
		if text, isErr := callText(t, p, "bot", "fx__alpha"); isErr {
			t.Fatalf("call %d: %s", i+1, text)
		}
		if n := <-held; n != 1 {
			t.Errorf("call %d ran upstream with %d leases held, want its own", i+1, n)
		}
	}
	if got, want := storeOps(t, reg), "limit_take ok 3, slot_release ok 3"; got != want {
		t.Errorf("store operations of %d calls (the store's upkeep left out): %s, want %s", calls, got, want)
	}
	if n, err := st.Redis().Client().ZCard(t.Context(), slots).Result(); err != nil || n != 0 {
		t.Errorf("%d leases left after the calls (%v), want 0", n, err)
	}
}

// storeOps lists mcp_proxy_store_requests_total as "op outcome n, ...",
// leaving out the probe's pings.
func storeOps(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "mcp_proxy_store_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			// The store's own upkeep runs beside the calls, on its own
			// clock: the ping, the replica's liveness key and its inbox.
			if op := labels["op"]; op != "ping" && op != "replica_alive" && op != "inbox_read" {
				out = append(out, fmt.Sprintf("%s %s %g", labels["op"], labels["outcome"], m.GetCounter().GetValue()))
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
