//go:build unix

// Package fdmode reads and uses the blocking mode of file descriptors: the
// proxy's stdin and stdout (used through the runtime's poller when they can
// be) and the pipes to stdio servers, read and written with raw system
// calls when they are non-blocking (see Reader).
package fdmode

import (
	"errors"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// IsNonBlocking reports whether fd is in non-blocking mode.
func IsNonBlocking(fd uintptr) bool {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_NONBLOCK != 0
}

// WriteNonBlocking writes as much of b to fd, a descriptor in non-blocking
// mode, as it takes without waiting, and returns how much that was.
// It is a raw system call (see Reader): a non-blocking write returns at
// once.
func WriteNonBlocking(fd uintptr, b []byte) int {
	n := 0
	for n < len(b) {
		m, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 || int(m) <= 0 {
			break // full (EAGAIN) or failed: the caller's waiting write takes it from here
		}
		n += int(m)
	}
	return n
}

// Reader returns a reader of f that waits in the runtime's poller and
// reads with raw system calls, when f is pollable (a pipe or socket in
// non-blocking mode); else f itself. A read that os.File makes tells the
// scheduler it may block, and when every scheduler slot had been idle,
// which is the case between calls through a proxy on one slot, that wakes
// the runtime's monitor thread on another core (a futex wake, then its
// polling): about a third of the proxy's CPU per stdio call. A read of a
// non-blocking descriptor returns at once, so it needs no such notice.
// Reads end with io.EOF at the end of input, as os.File's do.
func Reader(f *os.File) io.Reader {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	nonBlocking := false
	if rc.Control(func(fd uintptr) { nonBlocking = IsNonBlocking(fd) }) != nil || !nonBlocking {
		return f
	}
	return &rawReader{f: f, rc: rc}
}

type rawReader struct {
	f  *os.File
	rc syscall.RawConn
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			m, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller, then read again
			}
			n, errno = int(m), e
			return true
		}
	})
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
