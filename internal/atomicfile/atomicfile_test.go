package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, data := range []string{"one", "two, longer"} {
		if err := WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	if fi, err := os.Stat(p); err != nil || runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	// A failed write leaves nothing behind.
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
}

func TestLock(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no flock")
	}
	p := filepath.Join(t.TempDir(), "s.lock")
	unlock, err := Lock(p, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(p, 100*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("second Lock = %v, want ErrTimeout", err)
	}
	// Without a bound the second taker waits for the first.
	got := make(chan error, 1)
	go func() {
		u, err := Lock(p, 0)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Lock returned %v while the lock was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A symbolic link is refused.
	link := filepath.Join(t.TempDir(), "link.lock")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(link, time.Second); err == nil {
		t.Fatal("Lock through a symbolic link succeeded")
	}
}

func TestReadAtMost(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path string
		want       string
		opened     bool
		err        error
	}{
		{"within", write("a", "four"), "four", true, nil},
		{"at the limit", write("b", "fivee"), "fivee", true, nil},
		{"over: one byte more", write("c", "seven!!"), "seven!", true, nil},
		{"missing", filepath.Join(dir, "none"), "", false, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, opened, err := ReadAtMost(tc.path, 5)
			if string(data) != tc.want || opened != tc.opened || !errors.Is(err, tc.err) {
				t.Fatalf("ReadAtMost = %q, %v, %v; want %q, %v, %v", data, opened, err, tc.want, tc.opened, tc.err)
			}
		})
	}
	if runtime.GOOS != "windows" {
		// A folder opens but does not read: the error is the read's.
		_, opened, err := ReadAtMost(dir, 5)
		var pe *fs.PathError
		if !opened || !errors.As(err, &pe) || pe.Op != "read" {
			t.Fatalf("folder: opened %v, err %v; want opened, a read *fs.PathError", opened, err)
		}
	}
}
