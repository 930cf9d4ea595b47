package integrity

import "testing"

// TestImport: Import copies the tools the destination lacks, keeps the
// destination's own records of the tools it holds (decisions made there),
// and copies nothing the second time.
func TestImport(t *testing.T) {
	src, _, srcDir := newGuard(t)
	src.Review(serverOf("calc", quarantine, tool("add", "Adds."), tool("sub", "Subtracts.")), nil)
	dst, _, _ := newGuard(t)
	dst.Review(serverOf("calc", quarantine, tool("add", "Adds. Here first.")), nil)
	from := NewStore(srcDir)
	if n, err := dst.Store().Import(from, "calc", true); err != nil || n != 1 {
		t.Fatalf("dry run: %d, %v; want 1", n, err)
	}
	for i, want := range []int{1, 0} {
		n, err := dst.Store().Import(from, "calc", false)
		if err != nil || n != want {
			t.Fatalf("import %d: %d, %v; want %d", i, n, err, want)
		}
	}
	rev := dst.Review(serverOf("calc", quarantine, tool("add", "Adds. Here first."), tool("sub", "Subtracts.")), nil)
	if h := held(rev); h["add"] || h["sub"] {
		t.Errorf("after the import: held %v, want neither", h)
	}
	if n, err := dst.Store().Import(from, "none", false); err != nil || n != 0 {
		t.Errorf("import of a server without pins: %d, %v", n, err)
	}
}
