package upstream

import (
	"testing"
	"time"
)

// A 2026-07-28 server's list cache hints (ttlMs, cacheScope) are kept in
// the snapshot, and the proxy honours them for its own copy: once the TTL
// has passed, RefreshStale reads the list again (and the new one is
// published); before that, or for a list given no positive TTL, it reads
// nothing.
func TestListCacheHintsHonoured(t *testing.T) {
	m := newModernServer(`[{"name":"one","inputSchema":{"type":"object"}}]`)
	m.listHints = `,"ttlMs":1,"cacheScope":"public"`
	c := startModern(t, m, Options{OnRequest: noRelay})
	snap := c.Snapshot()
	if h := snap.ToolsHint; !h.Given || h.TTL != time.Millisecond || !h.Public {
		t.Fatalf("tools hint %+v, want given, 1ms, public", h)
	}
	if h := snap.ResourcesHint; h.Given {
		t.Errorf("resources hint %+v: the server gave none", h)
	}
	m.mu.Lock()
	m.tools = `[{"name":"two","inputSchema":{"type":"object"}}]`
	m.listHints = `,"ttlMs":3600000,"cacheScope":"private"`
	lists := m.lists
	m.mu.Unlock()
	for !snap.ToolsHint.Stale(time.Now()) {
		time.Sleep(time.Millisecond)
	}
	c.RefreshStale()
	snap = waitSnapshot(t, c, 10*time.Second, "the list read again", func(s *Snapshot) bool {
		return len(s.Tools) == 1 && s.Tools[0].Name == "two"
	})
	if h := snap.ToolsHint; !h.Given || h.TTL != time.Hour || h.Public {
		t.Errorf("tools hint %+v, want given, 1h, private", h)
	}
	c.RefreshStale() // fresh for an hour: nothing is read
	c.RefreshStale()
	m.mu.Lock()
	if m.lists != lists+1 {
		t.Errorf("tools/list was asked %d times after the first list, want once", m.lists-lists)
	}
	m.mu.Unlock()
}

// CacheHint.Narrow keeps the earlier end of freshness and is public only
// when both are; a missing hint makes none.
func TestCacheHintNarrow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := CacheHint{Given: true, TTL: time.Minute, Public: true, Fetched: t0}
	b := CacheHint{Given: true, TTL: time.Second, Public: false, Fetched: t0.Add(time.Second)}
	if n := a.Narrow(b); n.Fetched.Add(n.TTL) != t0.Add(2*time.Second) || n.Public {
		t.Errorf("Narrow = %+v", n)
	}
	if n := a.Narrow(CacheHint{}); n.Given {
		t.Errorf("Narrow with no hint = %+v", n)
	}
	if r := a.Remaining(t0.Add(59 * time.Second)); r != time.Second {
		t.Errorf("Remaining = %v", r)
	}
	if r := a.Remaining(t0.Add(2 * time.Minute)); r != 0 {
		t.Errorf("Remaining after the TTL = %v", r)
	}
}

// FuzzParseCacheHint: any ttlMs and cacheScope are read without a panic,
// into a TTL from 0 to a day.
func FuzzParseCacheHint(f *testing.F) {
	for _, s := range []string{`0`, `1500`, `-3`, `1e3`, `1.5`, `"5"`, `null`, `99999999999999999999`} {
		f.Add(s, `"public"`)
	}
	f.Fuzz(func(t *testing.T, ttl, scope string) {
		h := ParseCacheHint([]byte(ttl), []byte(scope), time.Unix(0, 0))
		if h.TTL < 0 || h.TTL > maxHintMs*time.Millisecond || !h.Given && (h.TTL != 0 || h.Public) {
			t.Fatalf("%q %q: %+v", ttl, scope, h)
		}
	})
}
