//go:build redis

package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// maxSessionBytes is issue 32's bound on a go-sdk client's session with two
// calls in Redis (the sum of its keys' MEMORY USAGE).
const maxSessionBytes = 2048

// TestStoreScenarios runs the store scenarios at tiny counts with a real
// redis-server and checks what the report says: both sides measured, the
// store's round trips of a call (without limits, none for most calls: the
// session is read from the replica's copy; with a per_minute and a
// max_concurrent limit, one before the call, the take of the limits, with
// the session's read when its copy is not current, and the release
// after), a go-sdk session of at most 2 KB, and nothing left running,
// redis-server included.
func TestStoreScenarios(t *testing.T) {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed: apt-get install -y redis-server")
	}
	dir := t.TempDir()
	proxyBin, fixtureBin := buildBinaries(t, dir)
	jsonPath := filepath.Join(dir, "out.json")
	t.Setenv("TMPDIR", dir) // the run's temp dir, redis-server's among it
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	argv := []string{"loadtest", "-proxy", proxyBin, "-fixture", fixtureBin, "-n", "20", "-rounds", "2",
		"-scenarios", "store-http-c1,store-http-c8-limited", "-upstreams", "fixture", "-json", jsonPath}
	if err := run(ctx, argv, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	// The round trips of a call, by the operations that may make them, and
	// how many a call may make of them. The session is read from the
	// replica's copy (no trip), or from Redis when the copy is not
	// current (session_load, alone or with the take); a limited call
	// takes its limits once, with the read or alone (limit_take).
	type trips struct {
		ops   []string
		total float64 // every call makes exactly this many (-1: any)
		reads float64 // at most this many a call read the session in Redis
	}
	want := map[string]trips{
		"store-http-c1":         {ops: []string{"session_load/ok"}, total: -1, reads: 0.5},
		"store-http-c8-limited": {ops: []string{"limit_take/ok", "session_load_limit_take/ok"}, total: 1, reads: 0.5},
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(want))
	}
	for _, r := range rep.Results {
		if r.Error != "" || r.Store == nil {
			t.Fatalf("%s: error %q, store figures %v", r.Scenario, r.Error, r.Store)
		}
		for _, s := range []string{sideMemory, sideProxy} {
			if r.Sides[s].N != 20 {
				t.Errorf("%s: side %s made %d calls, want 20", r.Scenario, s, r.Sides[s].N)
			}
		}
		if _, ok := r.Ratios[sideProxy+"/"+sideMemory]; !ok {
			t.Errorf("%s: no proxy/memory ratio", r.Scenario)
		}
		// A lease's release is sent after the answer, in the background,
		// and the next take on the replica carries one not sent yet: at
		// most one a call goes on its own.
		w := want[r.Scenario]
		sum, reads := 0.0, 0.0
		for op, n := range r.Store.TripsPerCall {
			switch {
			case op == "slot_release/ok" && n <= 1:
			case slices.Contains(w.ops, op):
				sum += n
				if strings.HasPrefix(op, "session_load") {
					reads += n
				}
			default:
				t.Errorf("%s: %g store round trips a call of %s, want none", r.Scenario, n, op)
			}
		}
		if (w.total >= 0 && math.Abs(sum-w.total) > 1e-9) || reads > w.reads {
			t.Errorf("%s: store round trips a call %v, want %v: %g in all (-1: any) and at most %g session reads",
				r.Scenario, r.Store.TripsPerCall, w.ops, w.total, w.reads)
		}
		if r.Store.SessionKeys != 1 || r.Store.SessionBytes <= 0 || r.Store.SessionBytes > maxSessionBytes {
			t.Errorf("%s: a go-sdk session with two calls is %d B in %d keys, want one key of at most %d B",
				r.Scenario, r.Store.SessionBytes, r.Store.SessionKeys, maxSessionBytes)
		}
		if !strings.Contains(stdout.String(), r.Scenario+" (fixture), proxy on Redis: ") {
			t.Errorf("the table does not report the store figures of %s:\n%s", r.Scenario, stdout.String())
		}
	}
	if left := runningBinaries(proxyBin, fixtureBin); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
	for _, p := range runningBinaries(redisBin) {
		pid, _, _ := strings.Cut(p, " ")
		if cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline")); err == nil && strings.Contains(string(cmdline), dir) {
			t.Errorf("the run's redis-server is still running: %s", cmdline)
		}
	}
}
