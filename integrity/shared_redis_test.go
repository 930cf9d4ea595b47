//go:build redis

package integrity

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/store"
)

const sharedTestKey = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="

// openShared opens the Redis store on srv as one replica (or CLI) does.
func openShared(t *testing.T, srv *redistest.Server) *store.Store {
	t.Helper()
	st, err := store.Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "t:", EncryptionKey: sharedTestKey}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// sharedGuard is a replica's Guard over the pins in srv.
func sharedGuard(t *testing.T, srv *redistest.Server) *Guard {
	t.Helper()
	g, err := Open(Options{Shared: openShared(t, srv), Logger: zerolog.Nop(),
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}, []string{"calc"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSharedApprovalReachesReplicas: a tool changed upstream is held on two
// replicas; an approval through a third connection (the CLI) is announced,
// and replica B's Watch, whose own polls are an hour apart, re-evaluates
// at once and releases the tool.
func TestSharedApprovalReachesReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a, b := sharedGuard(t, srv), sharedGuard(t, srv)
	a.Review(serverOf("calc", quarantine, tool("add", "Adds.")), nil)
	in := serverOf("calc", quarantine, tool("add", "Adds. Now different."))
	for i, g := range []*Guard{a, b} {
		if !g.Review(in, nil).Verdict("add").Held {
			t.Fatalf("replica %d does not hold the changed tool", i)
		}
	}
	old := sharedWatchCap
	sharedWatchCap = time.Hour
	t.Cleanup(func() { sharedWatchCap = old })
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan []string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		b.Watch(ctx, time.Hour, func(servers []string) {
			select {
			case got <- servers:
			default:
			}
		})
	})
	defer func() { cancel(); wg.Wait() }()
	cli, err := NewSharedStore(openShared(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	// Watch subscribes in its goroutine, maybe after the approval is
	// announced: then the next write (replica A pinning a new tool) is.
	if _, err := cli.Approve("calc", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case servers := <-got:
			if !reflect.DeepEqual(servers, []string{"calc"}) {
				t.Errorf("changed %v, want [calc]", servers)
			}
			if b.Review(in, nil).Verdict("add").Held {
				t.Error("replica B still holds the approved tool")
			}
			return
		case <-deadline:
			t.Fatal("replica B's Watch did not hear the approval")
		case <-time.After(200 * time.Millisecond):
			a.Review(serverOf("calc", quarantine, tool("add", "Adds. Now different."), tool("sub", "Subtracts.")), nil)
		}
	}
}

// TestSharedPollCatchesUp: a replica that heard no announcement sees an
// approval at its next poll, by the revision in the store.
func TestSharedPollCatchesUp(t *testing.T) {
	srv := redistest.Start(t)
	a, b := sharedGuard(t, srv), sharedGuard(t, srv)
	a.Review(serverOf("calc", quarantine, tool("add", "Adds.")), nil)
	in := serverOf("calc", quarantine, tool("add", "Adds. v2"))
	if !b.Review(in, nil).Verdict("add").Held {
		t.Fatal("not held")
	}
	if got := b.Poll(); len(got) != 0 {
		t.Fatalf("poll without change: %v", got)
	}
	if _, err := a.Store().Approve("calc", nil); err != nil {
		t.Fatal(err)
	}
	if got := b.Poll(); !reflect.DeepEqual(got, []string{"calc"}) {
		t.Fatalf("poll after the approval: %v, want [calc]", got)
	}
	if b.Review(in, nil).Verdict("add").Held {
		t.Error("still held after the poll")
	}
}

// TestSharedPinsUnavailable: a Guard opens while Redis does not answer;
// its servers' tools are held, with an error naming the store, and are
// served once Redis answers again. Nothing is read from or written to a
// state directory meanwhile.
func TestSharedPinsUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	a := sharedGuard(t, srv)
	in := serverOf("calc", quarantine, tool("add", "Adds."))
	a.Review(in, nil)
	srv.Kill()
	b := sharedGuard(t, srv)
	rev := b.Review(in, nil)
	if !rev.Verdict("add").Held || !errors.Is(rev.Err, store.ErrUnavailable) ||
		!strings.Contains(rev.Err.Error(), "shared-state store (Redis) unavailable at "+srv.Addr) {
		t.Fatalf("with Redis down: held %v, err %v; want held with the store named", rev.Verdict("add").Held, rev.Err)
	}
	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for b.Review(in, nil).Verdict("add").Held {
		if time.Now().After(deadline) {
			t.Fatal("still held after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSharedImport: pin files are copied into the store once; a tool the
// store already holds keeps the store's records.
func TestSharedImport(t *testing.T) {
	srv := redistest.Start(t)
	files, _, dir := newGuard(t)
	files.Review(serverOf("calc", quarantine, tool("add", "Adds."), tool("sub", "Subtracts.")), nil)
	a := sharedGuard(t, srv)
	a.Review(serverOf("calc", quarantine, tool("add", "Adds. Here first.")), nil)
	src := NewStore(dir)
	for i, want := range []int{1, 0} {
		n, err := a.Store().Import(src, "calc", false)
		if err != nil || n != want {
			t.Fatalf("import %d: %d, %v; want %d", i, n, err, want)
		}
	}
	rev := a.Review(serverOf("calc", quarantine, tool("add", "Adds. Here first."), tool("sub", "Subtracts.")), nil)
	if h := held(rev); h["add"] || h["sub"] {
		t.Errorf("after the import: held %v, want neither", h)
	}
}

// TestSharedWriteRace: an approval whose read is overtaken by another
// replica's write (a new tool pinned) is made again on the new document:
// both the approval and the other write are kept.
func TestSharedWriteRace(t *testing.T) {
	srv := redistest.Start(t)
	a, b := sharedGuard(t, srv), sharedGuard(t, srv)
	a.Review(serverOf("calc", quarantine, tool("add", "Adds.")), nil)
	changed := serverOf("calc", quarantine, tool("add", "Adds. v2"))
	a.Review(changed, nil)
	cli, err := NewSharedStore(openShared(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	attempts := 0
	_, _, err = cli.update("calc", func(cur *pinFile) (*pinFile, error) {
		attempts++
		if attempts == 1 {
			// Replica B pins a new tool between this read and its write.
			b.Review(serverOf("calc", quarantine, tool("add", "Adds. v2"), tool("sub", "Subtracts.")), nil)
		}
		next := cur.clone()
		e := next.Tools["add"]
		next.Tools["add"] = &pinEntry{Pinned: &pinRecord{Fingerprint: e.Pending.Fingerprint, Since: e.Pending.Since, Definition: e.Pending.Definition}}
		return next, nil
	})
	if err != nil || attempts != 2 {
		t.Fatalf("update: %v after %d attempts, want 2", err, attempts)
	}
	tools, err := cli.Tools("calc")
	if err != nil || !reflect.DeepEqual(tools, []string{"add", "sub"}) {
		t.Fatalf("pinned tools %v, %v; want add and sub", tools, err)
	}
	if h := held(a.Review(serverOf("calc", quarantine, tool("add", "Adds. v2"), tool("sub", "Subtracts.")), nil)); h["add"] || h["sub"] {
		t.Errorf("held %v after the approval, want neither", h)
	}
}
