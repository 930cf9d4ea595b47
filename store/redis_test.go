//go:build redis

package store

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/internal/testpki"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// openRedis opens a Redis store on srv with the test key and its own
// registry.
func openRedis(t *testing.T, srv *redistest.Server) (*Store, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.NewStore(reg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "test:", EncryptionKey: testKey}, Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, reg
}

func upGauge(t *testing.T, reg *prometheus.Registry, want string) {
	t.Helper()
	text := "# HELP mcp_proxy_store_up 1 while the shared-state store answers, else 0; always 1 with the memory store.\n" +
		"# TYPE mcp_proxy_store_up gauge\nmcp_proxy_store_up " + want + "\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(text), "mcp_proxy_store_up"); err != nil {
		t.Error(err)
	}
}

// TestRedisReconnects: a Redis store answers, stops answering when Redis
// is killed (ErrUnavailable, up 0), and answers again once Redis is back,
// with no new Open: the client reconnects by itself.
func TestRedisReconnects(t *testing.T) {
	srv := redistest.Start(t)
	s, reg := openRedis(t, srv)
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	upGauge(t, reg, "1")
	if !s.Shared() || s.Type() != "redis" {
		t.Error("a Redis store is not shared")
	}
	srv.Kill()
	if err := s.Ready(t.Context()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ready with Redis down = %v, want ErrUnavailable", err)
	}
	upGauge(t, reg, "0")
	srv.Start()
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("Ready once Redis is back = %v", err)
	}
	upGauge(t, reg, "1")
}

// TestRedisRunOutcomes: a missing key is an answer (redis.Nil, ok), a
// server error is an error outcome and not ErrUnavailable, and the keys
// carry the prefix.
func TestRedisRunOutcomes(t *testing.T) {
	srv := redistest.Start(t)
	s, reg := openRedis(t, srv)
	r := s.Redis()
	key := r.Key("probe", "a")
	err := r.Run(t.Context(), "probe_get", func(ctx context.Context, c redisClient) error {
		return c.Get(ctx, key).Err()
	})
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("GET of a missing key = %v, want redis.Nil", err)
	}
	err = r.Run(t.Context(), "probe_bad", func(ctx context.Context, c redisClient) error {
		return c.Do(ctx, "NOSUCHCOMMAND").Err()
	})
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "store probe_bad: ") {
		t.Fatalf("unknown command = %v", err)
	}
	if err := r.Run(t.Context(), "probe_set", func(ctx context.Context, c redisClient) error {
		return c.Set(ctx, key, "v", 0).Err()
	}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	_ = r.Run(t.Context(), "probe_keys", func(ctx context.Context, c redisClient) error {
		var err error
		keys, err = c.Keys(ctx, "*").Result()
		return err
	})
	if len(keys) != 1 || keys[0] != "test:probe:a" {
		t.Errorf("keys = %q", keys)
	}
	// The probe's pings are left out.
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "mcp_proxy_store_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := m.GetLabel() // op, outcome
			if l[0].GetValue() != "ping" {
				got[l[0].GetValue()+"/"+l[1].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"probe_bad/error": 1, "probe_get/ok": 1, "probe_keys/ok": 1, "probe_set/ok": 1}
	if !maps.Equal(got, want) {
		t.Errorf("mcp_proxy_store_requests_total = %v, want %v", got, want)
	}
}

// TestRedisTLS: a rediss:// store trusts the CA of tls_ca_cert_path and
// answers; without it the server's certificate is unknown and the store is
// unavailable, with a text that says why.
func TestRedisTLS(t *testing.T) {
	ca := testpki.New(t)
	cert, key := ca.ServerPEM(t)
	srv := redistest.StartTLS(t, cert, key)
	caPath := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caPath, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(caPath string) *Store {
		s, err := Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "test:", EncryptionKey: testKey, TLSCACertPath: caPath}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	if err := open(caPath).Ready(t.Context()); err != nil {
		t.Fatalf("Ready over TLS with the CA = %v", err)
	}
	err := open("").Ready(t.Context())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("Ready over TLS without the CA = %v, want ErrUnavailable naming the unknown authority", err)
	}
}

// TestRedisSentinel: with sentinel set, the store finds the master through
// the sentinels and answers.
func TestRedisSentinel(t *testing.T) {
	srv := redistest.Start(t)
	sn := redistest.StartSentinel(t, srv)
	s, err := Open(config.Store{Type: config.StoreRedis, URL: "redis://" + redistest.MasterName + "/0", KeyPrefix: "test:", EncryptionKey: testKey,
		Sentinel: &config.Sentinel{Master: redistest.MasterName, Addrs: []string{sn.Addr}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("Ready through the sentinel = %v", err)
	}
	r := s.Redis()
	key := r.Key("probe")
	if err := r.Run(t.Context(), "probe_set", func(ctx context.Context, c redisClient) error {
		return c.Set(ctx, key, "through-sentinel", 0).Err()
	}); err != nil {
		t.Fatal(err)
	}
	// The value is on the master the sentinel named.
	direct, err := Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "test:", EncryptionKey: testKey}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	var got string
	if err := direct.Redis().Run(t.Context(), "probe_get", func(ctx context.Context, c redisClient) error {
		var err error
		got, err = c.Get(ctx, key).Result()
		return err
	}); err != nil || got != "through-sentinel" {
		t.Fatalf("GET on the master = %q, %v", got, err)
	}
}

// TestRedisClientHandshake: the store's connections speak RESP2 (the store
// uses nothing of RESP3, on which go-redis looks for push messages around
// every command) and send no CLIENT SETINFO when they connect.
func TestRedisClientHandshake(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	info, err := s.Redis().Client().ClientInfo(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if info.Resp != 2 || info.LibName != "" || info.LibVer != "" {
		t.Errorf("CLIENT INFO: resp=%d lib-name=%q lib-ver=%q, want resp=2 and no library named", info.Resp, info.LibName, info.LibVer)
	}
}
