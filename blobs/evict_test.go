package blobs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// sizes records what OnStoreSize reported, per agent.
type sizes struct {
	mu   sync.Mutex
	last map[string]int64
}

func (s *sizes) record(agent string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]int64{}
	}
	s.last[agent] = n
}

func (s *sizes) get(agent string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.last[agent]
	return n, ok
}

func newBounded(t *testing.T, maxBytes int64, maxAge time.Duration) (*Materializer, string, *sizes) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobs")
	sz := &sizes{}
	m, err := New(Options{Dir: dir, MaxStoreBytes: maxBytes, MaxAge: maxAge, OnStoreSize: sz.record})
	if err != nil {
		t.Fatal(err)
	}
	return m, dir, sz
}

// blobOf is n bytes of content unique to seed.
func blobOf(seed, n int) []byte {
	return bytes.Repeat([]byte{byte(seed), byte(seed >> 8), 'x'}, n/3+1)[:n]
}

// writeOne rewrites a one-blob result and returns its text.
func writeOne(t *testing.T, m *Materializer, agent string, data []byte) string {
	t.Helper()
	out, _, err := m.Rewrite(agent, resultOf(resourceItem("file:///d.bin", "", data)), false)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(textsOf(t, out), "\n")
}

// age sets a file's modification time to d ago.
func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// dirBytes sums the sizes of the regular files directly in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// TestEvictOldestToFitBudget is issue 12, item 10: with blobs.max_bytes set,
// a new file evicts the oldest ones until the folder fits; files the store
// did not write are never touched and the gauge follows the folder.
func TestEvictOldestToFitBudget(t *testing.T) {
	m, dir, sz := newBounded(t, 3000, time.Hour)
	agentDir := filepath.Join(dir, "a")
	var names []string
	for i := range 3 {
		data := blobOf(i, 1000)
		writeOne(t, m, "a", data)
		names = append(names, shaName(data, "bin"))
		age(t, filepath.Join(agentDir, names[i]), time.Duration(30-i)*time.Minute) // 0 is the oldest
	}
	// Foreign files: a note, a file named like a blob but in upper case, a
	// link named like a blob. None is ours to count or delete.
	foreign := []string{"notes.txt", strings.ToUpper(shaName([]byte("z"), "")), shaName([]byte("link"), "bin")}
	outside := filepath.Join(t.TempDir(), "outside.bin")
	if err := os.WriteFile(outside, make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range foreign[:2] {
		if err := os.WriteFile(filepath.Join(agentDir, f), make([]byte, 100), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(agentDir, foreign[2])); err != nil {
		t.Fatal(err)
	}

	text := writeOne(t, m, "a", blobOf(9, 1500))
	if strings.Contains(text, "unavailable") {
		t.Fatalf("a blob that fits after eviction was refused: %s", text)
	}
	// 1000*3 + 1500 > 3000: the two oldest go, the third stays.
	for i, want := range []bool{false, false, true} {
		_, err := os.Lstat(filepath.Join(agentDir, names[i]))
		if got := err == nil; got != want {
			t.Errorf("file %d (age rank %d) present = %v, want %v", i, i, got, want)
		}
	}
	for _, f := range foreign {
		if _, err := os.Lstat(filepath.Join(agentDir, f)); err != nil {
			t.Errorf("foreign file %s was removed: %v", f, err)
		}
	}
	if fi, err := os.Stat(outside); err != nil || fi.Size() != 5000 {
		t.Errorf("the link's target outside the folder changed: %v", err)
	}
	if n, ok := sz.get("a"); !ok || n != 2500 {
		t.Errorf("reported store size = %d, %v; want 2500", n, ok)
	}
	if got := dirBytes(t, agentDir) - 200; got != 2500 { // minus the two foreign regular files
		t.Errorf("blob bytes on disk = %d, want 2500", got)
	}
}

// TestStoreFull: a blob that cannot fit even in an empty folder becomes the
// store-full text, writes nothing and evicts nothing that is young.
func TestStoreFull(t *testing.T) {
	m, dir, _ := newBounded(t, 1000, time.Hour)
	small := blobOf(1, 600)
	writeOne(t, m, "a", small)
	out, rep, err := m.Rewrite("a", resultOf(resourceItem("file:///big.bin", "", blobOf(2, 1001))), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := textsOf(t, out); !slices.Equal(got, []string{"[attachment unavailable: blob store full]"}) {
		t.Fatalf("texts = %q", got)
	}
	if rep.Blobs[0].Result != ResultStoreFull {
		t.Errorf("result = %q, want %q", rep.Blobs[0].Result, ResultStoreFull)
	}
	if tree := treeOf(t, dir); !slices.Equal(tree, []string{"a", "a/" + shaName(small, "bin")}) {
		t.Errorf("folder = %v; want only the earlier file", tree)
	}
	// Fits only with the young file gone: it goes.
	text := writeOne(t, m, "a", blobOf(3, 900))
	if strings.Contains(text, "unavailable") {
		t.Fatalf("refused: %s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", shaName(small, "bin"))); err == nil {
		t.Errorf("the older file was kept over budget")
	}
}

// TestEvictByAge: files older than max_age go at the next write, and a
// reused file counts as new.
func TestEvictByAge(t *testing.T) {
	m, dir, _ := newBounded(t, 1<<20, time.Hour)
	oldData, reusedData := blobOf(1, 100), blobOf(2, 100)
	writeOne(t, m, "a", oldData)
	writeOne(t, m, "a", reusedData)
	age(t, filepath.Join(dir, "a", shaName(oldData, "bin")), 2*time.Hour)
	age(t, filepath.Join(dir, "a", shaName(reusedData, "bin")), 2*time.Hour)
	writeOne(t, m, "a", reusedData) // reused: fresh again
	writeOne(t, m, "a", blobOf(3, 100))
	if _, err := os.Stat(filepath.Join(dir, "a", shaName(oldData, "bin"))); err == nil {
		t.Errorf("a file older than max_age survived a write")
	}
	if _, err := os.Stat(filepath.Join(dir, "a", shaName(reusedData, "bin"))); err != nil {
		t.Errorf("a reused file was evicted by age: %v", err)
	}
}

// TestSweep: at startup every agent folder is trimmed by age and budget and
// reported; a folder that is a symbolic link is not entered, and a missing
// blobs directory is not created.
func TestSweep(t *testing.T) {
	m, dir, sz := newBounded(t, 1000, time.Hour)
	if err := m.Sweep(); err != nil {
		t.Fatalf("sweep of a missing dir: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("sweep created %s", dir)
	}
	write := func(agent string, data []byte, ago time.Duration) string {
		p := filepath.Join(dir, agent, shaName(data, ""))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		age(t, p, ago)
		return p
	}
	expired := write("a", blobOf(1, 10), 2*time.Hour)
	oldest := write("a", blobOf(2, 600), 30*time.Minute)
	newest := write("a", blobOf(3, 600), time.Minute)
	other := write("b", blobOf(4, 10), time.Minute)
	// A linked folder full of old blob-named files elsewhere.
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	victim := filepath.Join(elsewhere, shaName(blobOf(6, 10), ""))
	if err := os.MkdirAll(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, blobOf(6, 10), 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, victim, 5*time.Hour)
	if err := os.Symlink(elsewhere, filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}

	if err := m.Sweep(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{expired: false, oldest: false, newest: true, other: true, victim: true} {
		_, err := os.Stat(path)
		if got := err == nil; got != want {
			t.Errorf("%s present = %v, want %v", path, got, want)
		}
	}
	if n, _ := sz.get("a"); n != 600 {
		t.Errorf("size of a = %d, want 600", n)
	}
	if n, _ := sz.get("b"); n != 10 {
		t.Errorf("size of b = %d, want 10", n)
	}
	if _, ok := sz.get("c"); ok {
		t.Errorf("the linked folder was swept")
	}
}

// TestConcurrentWritersKeepBudget: two sessions of one agent writing at once
// never leave the folder over its budget, and every blob either lands or is
// refused as store full.
func TestConcurrentWritersKeepBudget(t *testing.T) {
	const budget = 10_000
	m, dir, sz := newBounded(t, budget, time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			for i := range 40 {
				out, rep, err := m.Rewrite("a", resultOf(resourceItem(fmt.Sprintf("file:///%d-%d.bin", w, i), "", blobOf(w*1000+i, 900+i))), false)
				if err != nil {
					errs <- err
					return
				}
				if r := rep.Blobs[0].Result; r != ResultWritten {
					errs <- fmt.Errorf("writer %d blob %d: %s (%s)", w, i, r, out)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	onDisk := dirBytes(t, filepath.Join(dir, "a"))
	if onDisk > budget {
		t.Errorf("folder holds %d bytes, over the %d budget", onDisk, budget)
	}
	if n, _ := sz.get("a"); n != onDisk {
		t.Errorf("reported %d bytes, folder holds %d", n, onDisk)
	}
	if tree := treeOf(t, dir); slices.ContainsFunc(tree, func(p string) bool { return strings.Contains(p, tmpPrefix) }) {
		t.Errorf("temporary files left: %v", tree)
	}
}

func TestIsBlobName(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for name, want := range map[string]bool{
		sha: true, sha + ".png": true, sha + ".0123456789abcdef": true,
		sha + ".0123456789abcdefg": false, sha + ".": false, sha + ".PNG": false, sha + ".a-b": false,
		strings.ToUpper(sha): false, sha[:63]: false, sha + "0": false, ".tmp-" + sha: false, "notes.txt": false,
	} {
		if got := isBlobName(name); got != want {
			t.Errorf("isBlobName(%q) = %v, want %v", name, got, want)
		}
	}
}
