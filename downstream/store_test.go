package downstream

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// testStoreKey is a valid store.encryption_key.
const testStoreKey = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="

// TestReadyzNamesTheStore: with a Redis store that cannot be reached,
// /readyz is 503 and says it is the store, even with every required server
// connected.
func TestReadyzNamesTheStore(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	st, err := store.Open(config.Store{Type: config.StoreRedis, URL: "redis://" + addr, KeyPrefix: "t:", EncryptionKey: testStoreKey}, store.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := New(Options{
		Config:    parseConfig(t, "blobs: {mode: passthrough}\nservers:\n  fx: {command: fixture, required: true}\n"),
		Upstreams: map[string]Upstream{"fx": connected(echoTool)},
		Logger:    zerolog.Nop(),
		Version:   "test",
		Store:     st,
	})
	p.Refresh()
	srv := startHTTP(t, p)
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := "not ready: store (shared-state store (Redis) unavailable at " + addr + " (ping): "
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(string(b), want) {
		t.Errorf("/readyz = %d %q, want 503 starting %q", resp.StatusCode, b, want)
	}
}
