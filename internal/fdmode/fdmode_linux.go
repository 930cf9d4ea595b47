package fdmode

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Why raw system calls. A read or write that os.File makes tells the
// scheduler it may block (entersyscall), and when every scheduler slot had
// been idle, which is the case between calls through a proxy on one slot,
// that wakes the runtime's monitor thread on another core (a futex wake,
// then its polling): about a third of the proxy's CPU per stdio call. A
// raw call gives no such notice, so it must never block: it is made with
// preadv2/pwritev2 and RWF_NOWAIT, which return EAGAIN rather than wait
// whatever the descriptor's mode (another process sharing the pipe could
// clear O_NONBLOCK under us, and a raw call that waited would stop every
// goroutine on the slot). A kernel without RWF_NOWAIT for the descriptor
// (older ones, for pipes) says EOPNOTSUPP, a sandbox that filters the new
// calls EPERM or EACCES, and the calls are made the ordinary way from then
// on.

// noNowait is set once a kernel refused RWF_NOWAIT.
var noNowait atomic.Bool

// nowait reads (write false) or writes b on fd at its current position
// without waiting: with a raw preadv2 or pwritev2 and RWF_NOWAIT, or the
// ordinary way once those are refused. It goes on after EINTR.
func nowait(write bool, fd uintptr, b []byte) (int, syscall.Errno) {
	for !noNowait.Load() {
		iov := unix.Iovec{Base: &b[0]}
		iov.SetLen(len(b))
		trap := uintptr(unix.SYS_PREADV2)
		if write {
			trap = unix.SYS_PWRITEV2
		}
		pos := int64(-1)                         // the current position, the only one a pipe has
		lo, hi := uintptr(pos), uintptr(pos>>32) // as the kernel joins them on 32 and 64 bits
		r, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&iov)), 1, lo, hi, unix.RWF_NOWAIT)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EINVAL, syscall.EPERM, syscall.EACCES:
			noNowait.Store(true)
			continue
		}
		return int(r), e
	}
	for {
		var n int
		var err error
		if write {
			n, err = syscall.Write(int(fd), b)
		} else {
			n, err = syscall.Read(int(fd), b)
		}
		if err != syscall.EINTR {
			e, _ := err.(syscall.Errno)
			return n, e
		}
	}
}

// WriteNonBlocking writes as much of b to fd, a descriptor in non-blocking
// mode, as it takes without waiting, and returns how much that was.
func WriteNonBlocking(fd uintptr, b []byte) int {
	n := 0
	for n < len(b) {
		m, errno := nowait(true, fd, b[n:])
		if errno != 0 || m <= 0 {
			break // full (EAGAIN) or failed: the caller's waiting write takes it from here
		}
		n += m
	}
	return n
}

// Reader returns a reader of f that waits in the runtime's poller and
// reads with raw calls that cannot block (see above), when f is pollable
// (a pipe or socket in non-blocking mode); else f itself. Reads end with
// io.EOF at the end of input and report a file closed under them as
// os.File does.
func Reader(f *os.File) io.Reader {
	rc := Conn(f)
	if rc == nil {
		return f
	}
	r := &rawReader{f: f, rc: rc}
	r.readFn = r.readOnce
	return r
}

// rawReader is used by one goroutine at a time, as any reader: the buffer
// and the outcome of a read are its fields, and the callback that the
// descriptor runs is bound once, so a read allocates nothing.
type rawReader struct {
	f      *os.File
	rc     syscall.RawConn
	readFn func(fd uintptr) bool
	p      []byte
	n      int
	errno  syscall.Errno
}

// readOnce reads into r.p; false (EAGAIN) waits in the poller.
func (r *rawReader) readOnce(fd uintptr) bool {
	r.n, r.errno = nowait(false, fd, r.p)
	return r.errno != syscall.EAGAIN
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p = p
	err := r.rc.Read(r.readFn)
	r.p = nil
	n, errno := r.n, r.errno
	switch {
	case err != nil:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			// The poller's own error for a file closed under the read is
			// internal; os.File.Read says this.
			err = os.ErrClosed
		}
		return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: err}
	case errno != 0:
		return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
