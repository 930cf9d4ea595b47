//go:build redis

package store

import (
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// replica opens a store on srv, as one replica, with a session store whose
// sessions expire after idle; it returns the sessions and the registry
// counting the store's operations.
func replica(t *testing.T, srv *redistest.Server) (*Store, *Sessions, *prometheus.Registry) {
	t.Helper()
	s, reg := openRedis(t, srv)
	return s, s.Sessions(idle), reg
}

// syncCopy waits until ss's copy holds every write announced so far.
func syncCopy(t *testing.T, ss *Sessions) {
	t.Helper()
	if err := ss.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// ops is the count of the store's operations in reg, by "op/outcome", the
// probe's pings left out.
func ops(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
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
	return got
}

// load is ss.Load of id, which must succeed.
func load(t *testing.T, ss *Sessions, id string) Session {
	t.Helper()
	got, err := ss.Load(t.Context(), id)
	if err != nil {
		t.Fatalf("Load(%s) = %v", id, err)
	}
	return got
}

// copied makes session sid-1 through writer and reads it on reader until
// reader serves it from its copy (the first read after the announcements
// is Redis's, the second the copy).
func copied(t *testing.T, writer, reader *Sessions) {
	t.Helper()
	if err := writer.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	syncCopy(t, reader)
	load(t, reader, "sid-1")
	if got := load(t, reader, "sid-1"); !got.Copy {
		t.Fatalf("second Load = %+v, want the copy", got)
	}
}

// TestSessionCopyHitCostsNoRoundTrip: once a session was read on a
// replica, its next reads there come from the copy and cost no operation
// in Redis, with or without limits to take (then the take alone goes).
func TestSessionCopyHitCostsNoRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	s, ss, reg := replica(t, srv)
	if err := ss.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	syncCopy(t, ss)
	if got := load(t, ss, "sid-1"); got.Copy || got.Fields["a"] != "dev" {
		t.Fatalf("first Load = %+v, want the session read from Redis", got)
	}
	before := ops(t, reg)
	for range 5 {
		if got := load(t, ss, "sid-1"); !got.Copy || got.Fields["a"] != "dev" {
			t.Fatalf("Load = %+v, want the session from the copy", got)
		}
	}
	b := []Bucket{{Key: s.Limits().BucketKey("t", "1"), PerMinute: 60, Burst: 10}}
	got, took, err := ss.LoadTaking(t.Context(), "sid-1", b, nil)
	if err != nil || !got.Copy || got.Fields["a"] != "dev" || took.Refused != -1 {
		t.Fatalf("LoadTaking = %+v %+v %v, want the copy and a token", got, took, err)
	}
	after := ops(t, reg)
	for k, n := range after {
		if d := n - before[k]; d != 0 && k != "limit_take/ok" {
			t.Errorf("reads from the copy made %g %s operations, want none", d, k)
		}
	}
	if d := after["limit_take/ok"] - before["limit_take/ok"]; d != 1 {
		t.Errorf("LoadTaking from the copy made %g limit_take operations, want 1", d)
	}
}

// TestSessionCopySeesOtherReplicasWrites: a write and a deletion made
// through another replica's store reach this replica's copy once
// announced: the next read gives the new fields, then no session.
func TestSessionCopySeesOtherReplicasWrites(t *testing.T) {
	srv := redistest.Start(t)
	_, a, _ := replica(t, srv)
	_, b, _ := replica(t, srv)
	copied(t, a, b)
	if err := a.Set(t.Context(), "sid-1", "l", "4"); err != nil {
		t.Fatal(err)
	}
	syncCopy(t, b)
	if got := load(t, b, "sid-1"); got.Fields["l"] != "4" {
		t.Errorf("Load on b after a's Set = %+v, want l=4", got)
	}
	if got := load(t, b, "sid-1"); !got.Copy || got.Fields["l"] != "4" {
		t.Errorf("Load on b once read again = %+v, want the new copy", got)
	}
	if err := a.Delete(t.Context(), "sid-1"); err != nil {
		t.Fatal(err)
	}
	syncCopy(t, b)
	if got := load(t, b, "sid-1"); got.Found() {
		t.Errorf("Load on b after a's Delete = %+v, want no session", got)
	}
}

// TestSessionCopyReadRace: a read of a session that an announced write
// overtakes (the read was answered before the write, and its result
// arrives after the announcement) keeps no copy: the next read goes to
// Redis and finds the write. Both for a session this replica had no entry
// for and for one whose copy had been dropped.
func TestSessionCopyReadRace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		known bool // b read the session before
	}{{"first read", false}, {"known session", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			_, a, _ := replica(t, srv)
			_, b, _ := replica(t, srv)
			if err := a.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
				t.Fatal(err)
			}
			syncCopy(t, b)
			if tc.known {
				load(t, b, "sid-1")
				if err := a.Set(t.Context(), "sid-1", "l", "1"); err != nil {
					t.Fatal(err)
				}
				syncCopy(t, b)
			}
			raced := false
			b.cache.afterRead = func(string) {
				if raced {
					return
				}
				raced = true
				if err := a.Set(t.Context(), "sid-1", "l", "7"); err != nil {
					t.Error(err)
				}
				syncCopy(t, b)
			}
			if got := load(t, b, "sid-1"); got.Fields["l"] == "7" {
				t.Fatalf("the racing read = %+v, want the fields before the write", got)
			}
			if got := load(t, b, "sid-1"); got.Copy || got.Fields["l"] != "7" {
				t.Errorf("Load after the race = %+v, want the write, read from Redis", got)
			}
		})
	}
}

// TestSessionCopyDroppedWithSubscription: when the subscription carrying
// the announcements is killed, the copies go: once it is back, a read
// goes to Redis and finds what was written meanwhile (here a write that
// was never announced).
func TestSessionCopyDroppedWithSubscription(t *testing.T) {
	srv := redistest.Start(t)
	s, ss, reg := replica(t, srv)
	if err := ss.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	syncCopy(t, ss)
	load(t, ss, "sid-1")
	rc := s.Redis().Client()
	if err := rc.HSet(t.Context(), ss.key("sid-1"), "l", "5").Err(); err != nil {
		t.Fatal(err)
	}
	if got := load(t, ss, "sid-1"); !got.Copy || got.Fields["l"] == "5" {
		t.Fatalf("Load = %+v, want the copy without the write nobody announced", got)
	}
	if n, err := rc.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want the one subscription killed", n, err)
	}
	syncCopy(t, ss) // a ping answered on the new subscription
	before := ops(t, reg)["session_load/ok"]
	if got := load(t, ss, "sid-1"); got.Copy || got.Fields["l"] != "5" {
		t.Errorf("Load once subscribed again = %+v, want Redis's fields", got)
	}
	if d := ops(t, reg)["session_load/ok"] - before; d != 1 {
		t.Errorf("the read made %g session_load operations, want 1", d)
	}
}

// TestSessionCopyRedisDown: with Redis stopped (killed: the subscription
// fails at once; or frozen with SIGSTOP: it stops answering its pings), a
// session whose copy is current is not served from it for more than a
// second: its reads fail naming the store.
func TestSessionCopyRedisDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(t *testing.T, srv *redistest.Server, s *Store)
	}{
		{"killed", func(_ *testing.T, srv *redistest.Server, _ *Store) { srv.Kill() }},
		{"frozen", func(t *testing.T, _ *redistest.Server, s *Store) {
			info, err := s.Redis().Client().InfoMap(t.Context(), "server").Result()
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(info["Server"]["process_id"])
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			s, ss, _ := replica(t, srv)
			copied(t, ss, ss)
			tc.stop(t, srv, s)
			stopped := time.Now()
			for {
				asked := time.Since(stopped)
				got, err := ss.Load(t.Context(), "sid-1")
				if err != nil {
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("Load with Redis down = %v, want ErrUnavailable", err)
					}
					break
				}
				if !got.Copy || asked > maxAckAge {
					t.Fatalf("Load %s after Redis stopped = %+v, want ErrUnavailable (a copy is served at most %s)", asked, got, maxAckAge)
				}
			}
		})
	}
}

// TestSessionCopyExpiry: a session used only through the copy has its
// expiry refreshed in Redis when less than the idle timeout is left (a
// write sent after the read), and a refresh that finds the session gone
// drops the copy.
func TestSessionCopyExpiry(t *testing.T) {
	srv := redistest.Start(t)
	s, ss, _ := replica(t, srv)
	if err := ss.Create(t.Context(), "sid-1", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	rc := s.Redis().Client()
	key := ss.key("sid-1")
	syncCopy(t, ss)
	dueForRefresh(t, rc, key)
	load(t, ss, "sid-1") // read from Redis: refreshes, and keeps the copy
	s.redis.bg.Wait()
	dueForRefresh(t, rc, key) // unknown to the copy, which expects more
	// The copy's expiry is what the refresh set: make it due.
	ss.cache.mu.Lock()
	ss.cache.byID["sid-1"].expires = time.Now().Add(idle - time.Second)
	ss.cache.mu.Unlock()
	if got := load(t, ss, "sid-1"); !got.Copy {
		t.Fatalf("Load = %+v, want the copy", got)
	}
	s.redis.bg.Wait()
	if ttl, err := rc.PTTL(t.Context(), key).Result(); err != nil || ttl <= idle {
		t.Errorf("after a read from the copy due for a refresh the session expires in %s (%v), want more than %s", ttl, err, idle)
	}
	// Gone from Redis behind the copy's back (as when it expires): the
	// next refresh finds no key and drops the copy.
	if err := rc.Del(t.Context(), key).Err(); err != nil {
		t.Fatal(err)
	}
	ss.cache.mu.Lock()
	ss.cache.byID["sid-1"].expires = time.Now().Add(idle - time.Second)
	ss.cache.mu.Unlock()
	load(t, ss, "sid-1")
	s.redis.bg.Wait()
	if got := load(t, ss, "sid-1"); got.Found() {
		t.Errorf("Load after a refresh found no key = %+v, want no session", got)
	}
	// A copy past the expiry it knows is not served.
	if err := ss.Create(t.Context(), "sid-2", map[string]string{"a": "dev"}); err != nil {
		t.Fatal(err)
	}
	syncCopy(t, ss)
	load(t, ss, "sid-2")
	ss.cache.mu.Lock()
	ss.cache.byID["sid-2"].expires = time.Now().Add(-time.Millisecond)
	ss.cache.mu.Unlock()
	if got := load(t, ss, "sid-2"); got.Copy {
		t.Errorf("Load of a copy past its expiry = %+v, want a read from Redis", got)
	}
}
