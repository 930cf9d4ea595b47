//go:build redis

package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// maxSessionBytes is issue 32's bound on a go-sdk client's session with two
// calls in Redis (the sum of its keys' MEMORY USAGE).
const maxSessionBytes = 2048

// TestStoreScenarios runs the store scenarios at tiny counts with a real
// redis-server and checks what the report says: both sides measured, the
// store's round trips of a call (one without limits; with a per_minute and
// a max_concurrent limit, one before the call, the session read and the
// limits' script in one pipeline, and the release after), a go-sdk session of at most 2 KB, and nothing left
// running, redis-server included.
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
	want := map[string]map[string]float64{
		"store-http-c1":         {"session_load/ok": 1},
		"store-http-c8-limited": {"session_load_limit_take/ok": 1},
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
		trips := maps.Clone(r.Store.TripsPerCall)
		if trips["slot_release/ok"] <= 1 {
			delete(trips, "slot_release/ok")
		}
		if !maps.Equal(trips, want[r.Scenario]) {
			t.Errorf("%s: store round trips a call %v, want %v and slot_release/ok at most 1", r.Scenario, r.Store.TripsPerCall, want[r.Scenario])
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
