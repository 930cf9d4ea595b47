//go:build redis

package downstream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// redisStore opens a store on srv, as a replica would.
func redisStore(t *testing.T, srv *redistest.Server) *store.Store {
	t.Helper()
	st, err := store.Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "mcp-proxy:", EncryptionKey: testStoreKey}, store.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestRefusalGivesBackOtherLimitsRedis: checkGiveBack with the Redis store.
func TestRefusalGivesBackOtherLimitsRedis(t *testing.T) {
	srv := redistest.Start(t)
	checkGiveBack(t, storeProxy(t, giveBackYAML, redisStore(t, srv)))
}

// TestRateLimitAcrossReplicas: per_minute 5 on three replicas sharing one
// Redis lets exactly 5 calls through, whichever replica takes them.
func TestRateLimitAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	yaml := strings.Replace(giveBackYAML, "limits: {per_minute: 1}", "limits: {per_minute: 5}", 1)
	yaml = strings.Replace(yaml, "per_minute: 2, burst: 2", "per_minute: 100", 1)
	var replicas []*Proxy
	for range 3 {
		replicas = append(replicas, storeProxy(t, yaml, redisStore(t, srv)))
	}
	passed := 0
	for i := range 12 {
		text, isErr := callText(t, replicas[i%3], "bot", "fx__alpha")
		switch {
		case !isErr:
			passed++
		case !strings.HasPrefix(text, "tool 'fx__alpha' is denied by rate_limited: server 'fx' takes 5 calls a minute; retry in "):
			t.Fatalf("call %d: %s", i+1, text)
		}
	}
	if passed != 5 {
		t.Errorf("%d calls passed across three replicas, want 5", passed)
	}
}

// TestSlotLeaseOfADeadReplica: a max_concurrent slot held by a replica
// that died (a lease nobody releases) comes free when its lease ends, and
// the waiting call then runs.
func TestSlotLeaseOfADeadReplica(t *testing.T) {
	srv := redistest.Start(t)
	st := redisStore(t, srv)
	yaml := strings.Replace(giveBackYAML, "limits: {per_minute: 1}", "limits: {max_concurrent: 1}", 1)
	p := storeProxy(t, yaml, st)
	l := st.Limits()
	if err := l.Acquire(t.Context(), l.SlotsKey("fx", 1), 1, 300*time.Millisecond, "dead-replica"); err != nil {
		t.Fatal(err)
	}
	if text, isErr := callText(t, p, "bot", "fx__alpha"); isErr {
		t.Fatalf("the call did not get the dead replica's slot: %s", text)
	}
	// Its own slot was given back when it ended.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := l.Acquire(ctx, l.SlotsKey("fx", 1), 1, time.Second, "next"); err != nil {
		t.Fatalf("the call kept its slot: %v", err)
	}
}

// TestStoreDownFailsCalls: with Redis down a limited call fails with a
// JSON-RPC error naming the store, is not sent, and once Redis is back
// calls pass again with no restart.
func TestStoreDownFailsCalls(t *testing.T) {
	srv := redistest.Start(t)
	p := storeProxy(t, giveBackYAML, redisStore(t, srv))
	if text, isErr := callText(t, p, "bot", "fy__alpha"); isErr {
		t.Fatal(text)
	}
	srv.Kill()
	_, err := p.CallTool(t.Context(), "bot", nil, "fy__alpha", nil)
	var werr *wireError
	if !errors.As(err, &werr) || !strings.HasPrefix(werr.Message, "shared-state store (Redis) unavailable at "+srv.Addr) {
		t.Fatalf("call with Redis down = %v, want a JSON-RPC error naming the store", err)
	}
	srv.Start()
	if text, isErr := callText(t, p, "bot", "fy__alpha"); isErr {
		t.Fatalf("after Redis came back: %s", text)
	}
}
