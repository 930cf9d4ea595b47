package fdmode

import (
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Another process sharing a pipe can clear its O_NONBLOCK. The raw calls
// must still not wait in the kernel, or they would stop every goroutine on
// the proxy's one scheduler slot: a read waits in the poller and a write
// returns what fit, while other goroutines keep running.
func TestRawCallsNeverBlock(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ticks atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				ticks.Add(1)
				time.Sleep(time.Millisecond)
			}
		}
	}()
	progresses := func(what string) {
		t.Helper()
		before := ticks.Load()
		time.Sleep(100 * time.Millisecond)
		// A raw call that waited would hold the only P: 0 ticks. Any
		// progress at all shows it did not (a loaded machine may delay
		// many of the 100 ticks, not all).
		if ticks.Load()-before < 2 {
			t.Fatalf("%s: other goroutines stopped (%d ticks in 100 ms)", what, ticks.Load()-before)
		}
	}
	setBlocking := func(f *os.File) {
		rc, err := f.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) }); err != nil {
			t.Fatal(err)
		}
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rd := Reader(r)
	setBlocking(r)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 8)
		n, _ := rd.Read(buf)
		got <- string(buf[:n])
	}()
	progresses("a read of an empty pipe set blocking")
	if _, err := w.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "late" {
		t.Fatalf("read %q", s)
	}

	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<20)
	_ = rc.Write(func(fd uintptr) bool { WriteNonBlocking(fd, big); return true }) // fill it
	setBlocking(w)
	wrote := make(chan int, 1)
	go func() {
		_ = rc.Write(func(fd uintptr) bool { wrote <- WriteNonBlocking(fd, big[:1]); return true })
	}()
	progresses("a write to a full pipe set blocking")
	go func() { _, _ = r.Read(make([]byte, 8<<20)) }() // lets a write that did wait end
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the write did not return")
	}
}

// On Linux, Reader and Writer of a pipe in the poller use raw calls.
func TestReaderAndWriterAreRaw(t *testing.T) {
	r, w, err := os.Pipe() // non-blocking, in the poller
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, ok := Reader(r).(*rawReader); !ok {
		t.Errorf("Reader of a non-blocking pipe is %T", Reader(r))
	}
	if _, ok := Writer(w).(*rawFirstWriter); !ok {
		t.Errorf("Writer of a non-blocking pipe is %T", Writer(w))
	}
}

// A raw write and read of a pipe allocate nothing (the callbacks the
// descriptor runs are bound once): they are on every stdio call's path.
func TestRawCallsAllocateNothing(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rd, wr := Reader(r), NewNowaitWriter(w)
	msg, buf := []byte("a line\n"), make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		if n := wr.TryWrite(msg); n != len(msg) {
			t.Fatalf("wrote %d", n)
		}
		if n, err := rd.Read(buf); err != nil || n != len(msg) {
			t.Fatalf("read %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per write and read", allocs)
	}
}
