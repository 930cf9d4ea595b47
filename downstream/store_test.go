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

// TestSealingKeyFromTheStore: replicas whose Redis stores have one
// encryption_key take each other's multi-round-trip retries; a replica with
// another key refuses them. (Sealing needs no round trip to Redis.)
func TestSealingKeyFromTheStore(t *testing.T) {
	proxy := func(key string) string {
		st, err := store.Open(config.Store{Type: config.StoreRedis, URL: "redis://127.0.0.1:1", KeyPrefix: "t:", EncryptionKey: key}, store.Options{Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		p := New(Options{Config: parseConfig(t, oneServerYAML), Upstreams: map[string]Upstream{"fx": askingUpstream()},
			Logger: zerolog.Nop(), Version: "test", Store: st})
		p.Refresh()
		return startHTTP(t, p).URL + "/mcp"
	}
	first, second, other := proxy(testStoreKey), proxy(testStoreKey), proxy("AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=")
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	r1 := readModern(t, statelessCall(t, first, `{"name":"fx__echo","arguments":{"a":1},`+meta+`}`)[0])
	if !isSealedState(r1.Result.RequestState) {
		t.Fatalf("first round = %+v; want a sealed state", r1)
	}
	retry := func(url string) string {
		return statelessCall(t, url, `{"name":"fx__echo","arguments":{"a":1},"inputResponses":{"q":{"action":"accept","content":{}}},`+
			`"requestState":"`+r1.Result.RequestState+`",`+meta+`}`)[0]
	}
	if got := retry(second); !strings.Contains(got, `got {\"q\":{\"action\":\"accept\"`) {
		t.Errorf("retry at a replica with the same encryption_key = %s; want the upstream's result", got)
	}
	if got := retry(other); !strings.Contains(got, "invalid requestState") {
		t.Errorf("retry at a replica with another encryption_key = %s; want it refused", got)
	}
}
