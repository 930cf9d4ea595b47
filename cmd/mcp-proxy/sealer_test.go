package main

import (
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// TestStateSealerSharedByReplicas: two replicas configured with one Redis
// store (and one encryption_key) seal multi-round-trip states with the same
// key, so that each opens the other's; another key does not open them, and
// the memory store leaves the proxy its own random key.
func TestStateSealerSharedByReplicas(t *testing.T) {
	open := func(key string) *store.Store {
		t.Helper()
		// Open does not dial: no Redis is needed to derive the keys.
		st, err := store.Open(config.Store{Type: config.StoreRedis, URL: "redis://127.0.0.1:1/0", KeyPrefix: "mcp-proxy:", EncryptionKey: key}, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	const key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	const other = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="
	a, err := stateSealer(open(key))
	if err != nil || a == nil {
		t.Fatalf("stateSealer = %v, %v; want a sealer", a, err)
	}
	b, _ := stateSealer(open(key))
	c, _ := stateSealer(open(other))
	token := a.Seal("p", []byte("state"), time.Now().Add(time.Minute))
	if got, err := b.Open("p", token, time.Now()); err != nil || string(got) != "state" {
		t.Errorf("the other replica opened %q, %v; want the state", got, err)
	}
	if _, err := c.Open("p", token, time.Now()); err == nil {
		t.Error("a replica with another encryption_key opened the state")
	}
	mem, err := store.Open(config.Store{Type: config.StoreMemory}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := stateSealer(mem); s != nil || err != nil {
		t.Errorf("memory store: stateSealer = %v, %v; want nil, nil", s, err)
	}
}
