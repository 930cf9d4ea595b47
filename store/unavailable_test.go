package store

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

const testKey = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="

// silentServer accepts connections and never answers, like a Redis that
// hangs; it returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// closedAddr is an address where nothing listens.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestUnavailable: a store that refuses connections or never answers makes
// Ready fail with ErrUnavailable, a text naming the store and its address
// but not the URL's password, and the metrics say so.
func TestUnavailable(t *testing.T) {
	for name, addr := range map[string]string{"refused": closedAddr(t), "silent": silentServer(t)} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := metrics.NewStore(reg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(config.Store{Type: config.StoreRedis, URL: "redis://proxy:hunter2-secret@" + addr + "/0",
				KeyPrefix: "mcp-proxy:", EncryptionKey: testKey}, Options{Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.Ready(t.Context())
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Ready = %v, want ErrUnavailable", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "shared-state store (Redis) unavailable at "+addr+" (ping): ") || strings.Contains(msg, "hunter2") {
				t.Errorf("error text %q", msg)
			}
			want := "# HELP mcp_proxy_store_up 1 while the shared-state store answers, else 0; always 1 with the memory store.\n" +
				"# TYPE mcp_proxy_store_up gauge\nmcp_proxy_store_up 0\n"
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcp_proxy_store_up"); err != nil {
				t.Error(err)
			}
			// The probe pings too: every request so far is a ping that
			// found the store unavailable.
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() != "mcp_proxy_store_requests_total" {
					continue
				}
				for _, series := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range series.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["op"] != "ping" || labels["outcome"] != "unavailable" {
						t.Errorf("request series %v", labels)
					}
				}
			}
		})
	}
}

// TestRedisLog: go-redis's lines become debug lines of the proxy's log.
func TestRedisLog(t *testing.T) {
	var logs strings.Builder
	l := redisLog{zerolog.New(&logs).Level(zerolog.DebugLevel).With().Str("component", "go-redis").Logger()}
	l.Printf(t.Context(), "redis: connection pool: failed to dial after %d attempts", 5)
	if got := logs.String(); got != `{"level":"debug","component":"go-redis","message":"redis: connection pool: failed to dial after 5 attempts"}`+"\n" {
		t.Errorf("log = %q", got)
	}
}
