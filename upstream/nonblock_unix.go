//go:build unix

package upstream

import "syscall"

// isNonBlocking reports whether fd is in non-blocking mode.
func isNonBlocking(fd uintptr) bool {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_NONBLOCK != 0
}

// writeNonBlocking writes as much of b to fd, a descriptor in non-blocking
// mode, as it takes without waiting, and returns how much that was.
func writeNonBlocking(fd uintptr, b []byte) int {
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
			break // full (EAGAIN) or failed: the waiting write takes it from here
		}
	}
	return n
}
