//go:build unix

package fdmode

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Reader of a pipe in the poller reads what is there, waits for what is
// not, ends with io.EOF, and reports a close under a waiting read as
// os.File does; a regular file is read as it is.
func TestReader(t *testing.T) {
	r, w, err := os.Pipe() // non-blocking, in the poller
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rd := Reader(r)
	buf := make([]byte, 8)
	if n, err := rd.Read(buf[:0]); n != 0 || err != nil {
		t.Fatalf("empty read = %d, %v", n, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond) // the read waits in the poller first
		_, _ = w.Write([]byte("abc"))
		_ = w.Close()
	}()
	if n, err := rd.Read(buf); err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if n, err := rd.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("at the end: %d, %v; want io.EOF", n, err)
	}

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	rd2 := Reader(r2)
	done := make(chan error, 1)
	go func() {
		_, err := rd2.Read(buf)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	_ = r2.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("a read of a file closed under it = %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the file did not end the waiting read")
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Reader(f) != io.Reader(f) {
		t.Error("a regular file was wrapped")
	}
}

// WriteNonBlocking writes what a full pipe takes and returns at once.
func TestWriteNonBlocking(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<20)
	var n int
	if err := rc.Write(func(fd uintptr) bool { n = WriteNonBlocking(fd, big); return true }); err != nil {
		t.Fatal(err)
	}
	if n <= 0 || n >= len(big) {
		t.Fatalf("wrote %d of %d bytes into an empty pipe", n, len(big))
	}
	if err := rc.Write(func(fd uintptr) bool { n = WriteNonBlocking(fd, big); return true }); err != nil || n != 0 {
		t.Fatalf("a full pipe took %d bytes (%v)", n, err)
	}
}
