//go:build unix

package downstream

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A client's pipe opened in blocking mode is read through the poller while
// the session runs, and is left open and blocking again afterwards; a
// regular file is read as it is.
func TestPollableInput(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r := os.NewFile(uintptr(fds[0]), "stdin") // blocking, as a client's pipe is
	w := os.NewFile(uintptr(fds[1]), "client")
	defer r.Close()
	defer w.Close()
	if nonblocking(fds[0]) {
		t.Fatal("the test pipe is not in blocking mode")
	}
	in, restore := pollableInput(r)
	if in == io.Reader(r) {
		t.Fatal("a blocking pipe was not made pollable")
	}
	if !nonblocking(fds[0]) {
		t.Error("the pipe is not in non-blocking mode while served")
	}
	if _, err := w.WriteString("line 1\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := in.Read(buf); err != nil || string(buf[:n]) != "line 1\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	restore()
	if nonblocking(fds[0]) {
		t.Error("the pipe was left in non-blocking mode")
	}
	if _, err := w.WriteString("line 2\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "line 2\n" {
		t.Fatalf("the original stdin after restore: read %q, %v", buf[:n], err)
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "requests"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if in, restore := pollableInput(f); in != io.Reader(f) {
		t.Error("a regular file was replaced")
	} else {
		restore()
	}
}
