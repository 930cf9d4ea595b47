package integrity

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestWatchSeesApproval: a running Guard notices an approval made through
// another Store (the CLI) and names the server; the next Review lists the
// tool. A poll with no change reports nothing.
func TestWatchSeesApproval(t *testing.T) {
	g, _, dir := newGuard(t)
	g.Review(serverOf("calc", quarantine, tool("add", "Adds.")), nil)
	g.Review(serverOf("other", quarantine, tool("x", "X.")), nil)
	in := serverOf("calc", quarantine, tool("add", "Adds. Now different."))
	if !g.Review(in, nil).Verdict("add").Held {
		t.Fatal("not held")
	}
	if got := g.Poll(); len(got) != 0 {
		t.Fatalf("poll without change: %v", got)
	}

	cli := NewStore(dir)
	if _, err := cli.Approve("calc", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.Watch(ctx, 10*time.Millisecond, func(servers []string) {
			// changed runs without the Guard's lock: Review works here.
			if g.Review(in, nil).Verdict("add").Held {
				t.Error("still held inside the callback")
			}
			select {
			case got <- servers:
			default:
			}
		})
	}()
	select {
	case servers := <-got:
		if !reflect.DeepEqual(servers, []string{"calc"}) {
			t.Errorf("changed %v, want [calc]", servers)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not report the approval")
	}
	cancel()
	wg.Wait()
}

// TestWatchDeletedAndCorruptFile: deleting a pin file while the proxy runs
// re-pins on the next evaluation (trust on first use again) and releases
// the held tool; a file corrupted by hand holds every tool under
// quarantine and is not rewritten.
func TestWatchDeletedAndCorruptFile(t *testing.T) {
	g, _, dir := newGuard(t)
	path := filepath.Join(dir, "pins", "calc.json")
	g.Review(serverOf("calc", quarantine, tool("add", "Adds."), tool("sub", "Subtracts.")), nil)
	g.Review(serverOf("calc", quarantine, tool("add", "Adds. v2"), tool("sub", "Subtracts.")), nil)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := g.Poll(); !reflect.DeepEqual(got, []string{"calc"}) {
		t.Fatalf("after delete: %v", got)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("not re-pinned: %v", err)
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := g.Poll(); !reflect.DeepEqual(got, []string{"calc"}) {
		t.Fatalf("after corruption: %v", got)
	}
	rev := g.Review(serverOf("calc", quarantine, tool("add", "Adds. v2"), tool("sub", "Subtracts.")), nil)
	if h := held(rev); !h["add"] || !h["sub"] || rev.Err == nil {
		t.Errorf("corrupt file: held %v, err %v", h, rev.Err)
	}
	if data, _ := os.ReadFile(path); string(data) != "{broken" {
		t.Errorf("corrupt file rewritten: %s", data)
	}
}
