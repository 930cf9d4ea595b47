//go:build unix

package upstream

import "syscall"

// isNonBlocking reports whether fd is in non-blocking mode.
func isNonBlocking(fd uintptr) bool {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_NONBLOCK != 0
}
