//go:build redis

package store

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// idle is the idle timeout of the sessions of idleSession.
const idle = 10 * time.Minute

// idleSession opens a store on srv whose sessions expire after idle, with
// one session, sid-1, made: it returns the store, its sessions, sid-1's
// key and the Redis client.
func idleSession(t *testing.T, srv *redistest.Server) (*Store, *Sessions, string, redis.UniversalClient) {
	t.Helper()
	s, _ := openRedis(t, srv)
	ss := s.Sessions(idle)
	if err := ss.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	return s, ss, ss.key("sid-1"), s.Redis().Client()
}

// dueForRefresh leaves key less than idle to live, so that its next read
// refreshes its expiry.
func dueForRefresh(t *testing.T, rc redis.UniversalClient, key string) {
	t.Helper()
	if err := rc.PExpire(t.Context(), key, idle-time.Second).Err(); err != nil {
		t.Fatal(err)
	}
}

// dirty is Redis's count of writes since its last save: what a write to
// the append-only file, and with appendfsync always a wait for the disk,
// follows.
func dirty(t *testing.T, s *Store) int {
	t.Helper()
	info, err := s.Redis().Client().Info(t.Context(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "rdb_changes_since_last_save:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rdb_changes_since_last_save in %q", info)
	return 0
}

// TestSessionReadsWriteNothing: reading a session whose expiry is more
// than the idle timeout away writes nothing to Redis; once less is left, a
// read sets it to the idle timeout plus the slack again.
func TestSessionReadsWriteNothing(t *testing.T) {
	srv := redistest.Start(t)
	s, ss, key, rc := idleSession(t, srv)
	before := dirty(t, s)
	for range 5 {
		got, err := ss.Reload(t.Context(), "sid-1")
		if err != nil || got.Fields["a"] != "dev" {
			t.Fatalf("Reload = %v %v", got, err)
		}
	}
	if after := dirty(t, s); after != before {
		t.Errorf("5 reads of a fresh session made %d writes, want 0", after-before)
	}
	dueForRefresh(t, rc, key)
	if got, err := ss.Reload(t.Context(), "sid-1"); err != nil || !got.Found() {
		t.Fatalf("Reload = %v %v", got, err)
	}
	s.redis.bg.Wait() // the refresh is sent after the read
	ttl, err := rc.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := idle + time.Minute; ttl <= idle || ttl > want {
		t.Errorf("after a read with less than the idle timeout left, the session expires in %s, want in (%s, %s]", ttl, idle, want)
	}
	if got, err := ss.Load(t.Context(), "sid-2"); err != nil || got.Found() {
		t.Errorf("Load of an unknown session = %v %v, want not found", got, err)
	}
}

// TestSessionReadsDuringWritePause: a session is read while Redis takes
// no writes (CLIENT PAUSE WRITE, as during a failover), even one whose
// expiry is due for a refresh: the read is plain reads, and the refresh
// is sent after it, taken once Redis takes writes again.
func TestSessionReadsDuringWritePause(t *testing.T) {
	s, ss, key, rc := idleSession(t, redistest.Start(t))
	dueForRefresh(t, rc, key)
	if err := rc.Do(t.Context(), "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := ss.Reload(t.Context(), "sid-1")
	if uerr := rc.Do(t.Context(), "CLIENT", "UNPAUSE").Err(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil || got.Fields["a"] != "dev" {
		t.Fatalf("Reload while Redis takes no writes = %v %v, want the session", got, err)
	}
	s.redis.bg.Wait()
	if ttl, err := rc.PTTL(t.Context(), key).Result(); err != nil || ttl <= idle {
		t.Errorf("after the pause the session expires in %s (%v), want more than %s", ttl, err, idle)
	}
}

// TestSessionNamesKeepOnlyLiveIDs: the ids whose keys a Sessions keeps are
// those of sessions that exist: not an id a client made up (an unknown id
// of 60 KB, read alone or with a take), nor one ended here, nor one that
// expired or ended on another replica once it is read again.
func TestSessionNamesKeepOnlyLiveIDs(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	ss := s.Sessions(10 * time.Minute)
	kept := func() []string {
		ss.cache.mu.Lock()
		defer ss.cache.mu.Unlock()
		var ids []string
		for id := range ss.cache.byID {
			ids = append(ids, id[:min(len(id), 16)])
		}
		return ids
	}
	for i := range 20 {
		id := strings.Repeat(strconv.Itoa(i), 60<<10)
		if got, err := ss.Load(t.Context(), id); err != nil || got.Found() {
			t.Fatalf("Load of a made-up id = %v %v", got.Found(), err)
		}
		b := []Bucket{{Key: s.Limits().BucketKey("t", strconv.Itoa(i)), PerMinute: 60, Burst: 1}}
		if got, _, err := ss.LoadTaking(t.Context(), id+"x", b, nil); err != nil || got.Found() {
			t.Fatalf("LoadTaking of a made-up id = %v %v", got.Found(), err)
		}
	}
	if ids := kept(); len(ids) != 0 {
		t.Fatalf("after reads of made-up ids, the keys of %d ids are kept: %q", len(ids), ids)
	}
	for _, id := range []string{"sid-1", "sid-2", "sid-3"} {
		if err := ss.Create(t.Context(), id, map[string]string{"a": "dev"}); err != nil {
			t.Fatal(err)
		}
		if got, err := ss.Load(t.Context(), id); err != nil || !got.Found() {
			t.Fatalf("Load(%s) = %v %v", id, got, err)
		}
	}
	if err := ss.Delete(t.Context(), "sid-1"); err != nil {
		t.Fatal(err)
	}
	// sid-2 expires, or ends on another replica.
	if err := s.Redis().Client().Del(t.Context(), ss.key("sid-2")).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := ss.Reload(t.Context(), "sid-2"); err != nil || got.Found() {
		t.Fatalf("Reload of a removed session = %v %v", got, err)
	}
	if ids := kept(); len(ids) != 1 || ids[0] != "sid-3" {
		t.Errorf("kept the keys of %q, want only sid-3's", ids)
	}
}

// TestCloseWaitsForRefresh: a session's expiry refresh, sent after the
// read, is not cut short by the store's Close: it is done when Close
// returns (here it waits for Redis to take writes again).
func TestCloseWaitsForRefresh(t *testing.T) {
	srv := redistest.Start(t)
	s, ss, key, rc := idleSession(t, srv)
	dueForRefresh(t, rc, key)
	// Writes wait 300 ms (within OpTimeout): the refresh is on its way
	// when Close is called.
	if err := rc.Do(t.Context(), "CLIENT", "PAUSE", "300", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := ss.Reload(t.Context(), "sid-1"); err != nil || !got.Found() {
		t.Fatalf("Reload = %v %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other, _ := openRedis(t, srv)
	if ttl, err := other.Redis().Client().PTTL(t.Context(), key).Result(); err != nil || ttl <= idle {
		t.Errorf("after Close the session expires in %s (%v), want more than %s: the refresh was cut short", ttl, err, idle)
	}
}
