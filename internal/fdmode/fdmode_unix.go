//go:build unix

// Package fdmode reads and uses the blocking mode of file descriptors: the
// proxy's stdin and stdout (used through the runtime's poller when they can
// be) and the pipes to stdio servers, which on Linux are read and written
// with raw system calls that cannot block (see Reader).
package fdmode

import "syscall"

// IsNonBlocking reports whether fd is in non-blocking mode.
func IsNonBlocking(fd uintptr) bool {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_NONBLOCK != 0
}
