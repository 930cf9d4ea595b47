//go:build unix && !linux

package fdmode

import (
	"io"
	"os"
	"syscall"
)

// WriteNonBlocking writes as much of b to fd, a descriptor in non-blocking
// mode, as it takes without waiting, and returns how much that was.
func WriteNonBlocking(fd uintptr, b []byte) int {
	n := 0
	for n < len(b) {
		m, err := syscall.Write(int(fd), b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break // full (EAGAIN) or failed: the caller's waiting write takes it from here
		}
		n += m
	}
	return n
}

// Reader returns f: raw reads are made on Linux only (fdmode_linux.go).
func Reader(f *os.File) io.Reader { return f }
