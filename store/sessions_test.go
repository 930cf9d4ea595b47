//go:build redis

package store

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

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
	s, _ := openRedis(t, srv)
	const idle = 10 * time.Minute
	ss := s.Sessions(idle)
	if err := ss.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	key := ss.key("sid-1")
	rc := s.Redis().Client()
	before := dirty(t, s)
	for range 5 {
		f, ok, err := ss.Load(t.Context(), "sid-1")
		if err != nil || !ok || f["a"] != "dev" {
			t.Fatalf("Load = %v %v %v", f, ok, err)
		}
	}
	if after := dirty(t, s); after != before {
		t.Errorf("5 reads of a fresh session made %d writes, want 0", after-before)
	}
	if err := rc.PExpire(t.Context(), key, idle-time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ss.Load(t.Context(), "sid-1"); err != nil || !ok {
		t.Fatalf("Load = %v %v", ok, err)
	}
	ss.refreshing.Wait() // the refresh is sent after the read
	ttl, err := rc.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := idle + time.Minute; ttl <= idle || ttl > want {
		t.Errorf("after a read with less than the idle timeout left, the session expires in %s, want in (%s, %s]", ttl, idle, want)
	}
	if _, ok, err := ss.Load(t.Context(), "sid-2"); err != nil || ok {
		t.Errorf("Load of an unknown session = %v %v, want not found", ok, err)
	}
}

// TestSessionReadsDuringWritePause: a session is read while Redis takes
// no writes (CLIENT PAUSE WRITE, as during a failover), even one whose
// expiry is due for a refresh: the read is plain reads, and the refresh
// is sent after it, taken once Redis takes writes again.
func TestSessionReadsDuringWritePause(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := openRedis(t, srv)
	const idle = 10 * time.Minute
	ss := s.Sessions(idle)
	if err := ss.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	rc := s.Redis().Client()
	if err := rc.PExpire(t.Context(), ss.key("sid-1"), idle-time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(t.Context(), "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	f, ok, err := ss.Load(t.Context(), "sid-1")
	if uerr := rc.Do(t.Context(), "CLIENT", "UNPAUSE").Err(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil || !ok || f["a"] != "dev" {
		t.Fatalf("Load while Redis takes no writes = %v %v %v, want the session", f, ok, err)
	}
	ss.refreshing.Wait()
	if ttl, err := rc.PTTL(t.Context(), ss.key("sid-1")).Result(); err != nil || ttl <= idle {
		t.Errorf("after the pause the session expires in %s (%v), want more than %s", ttl, err, idle)
	}
}
