package store

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestDerivedKeys: replicas with the same encryption_key derive the same
// keys; another key, or the memory store, gives others; the derived keys
// differ from each other and from the master key.
func TestDerivedKeys(t *testing.T) {
	a, _ := deriveKeys(master(7))
	b, _ := deriveKeys(master(7))
	c, _ := deriveKeys(master(8))
	if !bytes.Equal(a.Sealing(), b.Sealing()) || a.SessionID("s-1") != b.SessionID("s-1") {
		t.Error("two replicas with one encryption_key derive different keys")
	}
	if bytes.Equal(a.Sealing(), c.Sealing()) || a.SessionID("s-1") == c.SessionID("s-1") {
		t.Error("two encryption_keys derive the same keys")
	}
	if bytes.Equal(a.Sealing(), master(7)) || bytes.Equal(a.Sealing(), a.sessionID) || len(a.Sealing()) != 32 {
		t.Error("the sealing key is not a key of its own")
	}
	if id := a.SessionID("s-1"); id == a.SessionID("s-2") || len(id) != 43 {
		t.Errorf("SessionID = %q", id)
	}
	// A value sealed on one replica opens on another.
	sealed := a.Secrets().Seal([]byte("tok"), "k")
	if got, err := b.Secrets().Open(sealed, "k"); err != nil || string(got) != "tok" {
		t.Errorf("Open on the other replica = %q, %v", got, err)
	}

	m1, err := Open(config.Store{Type: config.StoreMemory}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := Open(config.Store{Type: config.StoreMemory}, Options{})
	if bytes.Equal(m1.Keys().Sealing(), m2.Keys().Sealing()) || m1.Keys().SessionID("x") == m2.Keys().SessionID("x") {
		t.Error("two memory stores share keys: they must be random per process")
	}
	if m1.Shared() || m1.Redis() != nil || m1.Type() != "memory" || m1.Ready(t.Context()) != nil || m1.Close() != nil {
		t.Error("the memory store is not the in-process default")
	}
}

// TestKeyNames: every key starts with the prefix, then the kind.
func TestKeyNames(t *testing.T) {
	r := &Redis{prefix: "mcp-proxy:"}
	for _, tc := range []struct {
		got, want string
	}{
		{r.Key("session", "abc"), "mcp-proxy:session:abc"},
		{r.Key("limit", "server_rate", "github"), "mcp-proxy:limit:server_rate:github"},
		{r.Key("ping"), "mcp-proxy:ping"},
		{(&Redis{}).Key("x", "y"), "x:y"},
	} {
		if tc.got != tc.want {
			t.Errorf("Key = %q, want %q", tc.got, tc.want)
		}
	}
}

// TestSessionNamesCache: the key of a session id is its HMAC under the
// prefix whether it comes from the cache or not, and the cache of a
// replica that served more sessions than it holds stays bounded and full.
func TestSessionNamesCache(t *testing.T) {
	keys, err := deriveKeys(master(7))
	if err != nil {
		t.Fatal(err)
	}
	ss := &Sessions{r: &Redis{prefix: "p:"}, keys: keys, cache: newSessionCache()}
	want := "p:session:" + keys.SessionID("sid-0")
	if got := ss.key("sid-0"); got != want {
		t.Fatalf("key = %q, want %q", got, want)
	}
	for i := range maxCachedSessions + 1 {
		id := "sid-" + strconv.Itoa(i+1)
		ss.cache.remember(id, ss.key(id))
		if n := len(ss.cache.byID); n > maxCachedSessions || len(ss.cache.byKey) != n {
			t.Fatalf("%d sessions cached (%d by key), want at most %d", n, len(ss.cache.byKey), maxCachedSessions)
		}
	}
	// One more session than the cache holds costs one entry, not all.
	if n := len(ss.cache.byID); n != maxCachedSessions {
		t.Errorf("%d sessions cached after %d sessions, want %d", n, maxCachedSessions+1, maxCachedSessions)
	}
	last := "sid-" + strconv.Itoa(maxCachedSessions+1)
	if k := ss.cache.keyOf(last); k != "p:session:"+keys.SessionID(last) {
		t.Errorf("the last session's key cached = %q", k)
	}
	if got := ss.key("sid-0"); got != want {
		t.Errorf("key of an id out of the cache = %q, want %q", got, want)
	}
}
