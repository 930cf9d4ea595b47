//go:build unix

// Package fdmode reads and uses the blocking mode of file descriptors: the
// proxy's stdin (read through the runtime's poller when it can be) and the
// pipes to stdio servers (written without waiting when they take it).
package fdmode

import "syscall"

// IsNonBlocking reports whether fd is in non-blocking mode.
func IsNonBlocking(fd uintptr) bool {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_NONBLOCK != 0
}

// WriteNonBlocking writes as much of b to fd, a descriptor in non-blocking
// mode, as it takes without waiting, and returns how much that was.
func WriteNonBlocking(fd uintptr, b []byte) int {
	n := 0
	for n < len(b) {
		m, err := syscall.Write(int(fd), b[n:])
		if m > 0 {
			n += m
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break // full (EAGAIN) or failed: the caller's waiting write takes it from here
		}
	}
	return n
}
