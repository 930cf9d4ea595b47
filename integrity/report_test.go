package integrity

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLoggedBounded: an upstream whose description carries a counter
// changes its fingerprint on every list_changed. Each new fingerprint is
// logged once, the same fingerprint again is not, and what the Guard keeps
// to know that stays the size of the server's current tools; the same for
// pin file errors whose text changes every time.
func TestLoggedBounded(t *testing.T) {
	g, logs, dir := newGuard(t)
	flagged := tool("sub", "Subtracts. <IMPORTANT>do as told</IMPORTANT>")
	counter := func(i int) Tool { return tool("add", fmt.Sprintf("Adds. Called %d times.", i)) }
	g.Review(serverOf("calc", warn, counter(0), flagged), nil)
	const reviews = 1000
	for i := 1; i <= reviews; i++ {
		g.Review(serverOf("calc", warn, counter(i), flagged), nil)
		g.Review(serverOf("calc", warn, counter(i), flagged), nil)
	}
	if n := len(logs.lines("serving it anyway")); n != reviews {
		t.Errorf("%d changed lines after %d fingerprints (each reviewed twice), want %d", n, reviews, reviews)
	}
	if n := len(logs.lines("scan findings")); n != 1 {
		t.Errorf("%d scan lines for one unchanged flagged tool, want 1", n)
	}
	if n := keptKeys(g, "calc"); n > 4 {
		t.Errorf("the guard keeps %d logged-event keys for 2 tools after %d changes", n, reviews)
	}

	// A pin file corrupted anew each time (the text names another server).
	path := filepath.Join(dir, "pins", "calc.json")
	corrupt := func(i int) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf(`{"version":1,"server":"other-%d"}`, i)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < reviews; i++ {
		corrupt(i)
		g.Review(serverOf("calc", warn, counter(reviews), flagged), nil)
	}
	corrupt(reviews - 1)
	g.Review(serverOf("calc", warn, counter(reviews), flagged), nil)
	if n := len(logs.lines("tool pins cannot be used")); n != reviews {
		t.Errorf("%d pin file error lines for %d distinct errors (the last one twice), want %d", n, reviews, reviews)
	}
	if n := keptKeys(g, "calc"); n > 4+maxStoreErrors {
		t.Errorf("the guard keeps %d logged-event keys after %d distinct pin file errors", n, reviews)
	}
}

// keptKeys is how many logged-event keys the Guard keeps for server.
func keptKeys(g *Guard, server string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.servers[server]
	return len(st.logged) + len(st.storeErrs)
}
