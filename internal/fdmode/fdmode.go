package fdmode

import (
	"os"
	"syscall"
)

// Conn returns w's descriptor when w is an *os.File in non-blocking mode
// (one the runtime's poller waits on), else nil.
func Conn(w any) syscall.RawConn {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonBlocking := false
	if rc.Control(func(fd uintptr) { nonBlocking = IsNonBlocking(fd) }) != nil || !nonBlocking {
		return nil
	}
	return rc
}

// TryWrite writes as much of b as rc, a descriptor Conn returned, takes
// without waiting, and returns how much that was: 0 for a nil rc or a
// closed file (the caller's waiting write then says why).
func TryWrite(rc syscall.RawConn, b []byte) int {
	if rc == nil || len(b) == 0 {
		return 0
	}
	n := 0
	_ = rc.Write(func(fd uintptr) bool {
		n = WriteNonBlocking(fd, b)
		return true // never wait here
	})
	return n
}
