//go:build unix

package downstream

import (
	"io"
	"os"
	"syscall"

	"github.com/mcp-proxy/mcp-proxy/internal/fdmode"
)

// pollableInput returns a reader of in that the Go runtime's poller waits
// on, and a function that undoes it, when in is a pipe or a socket opened
// in blocking mode (a client's pipe to the proxy's stdin). A blocking read
// holds an OS thread and its scheduler slot for as long as the client is
// quiet; the runtime then takes the slot back and hands it on each time a
// call runs on the other thread, waking threads to do it. Read through the
// poller, the reader parks like any other goroutine. The descriptor is
// duplicated, so closing the returned reader leaves in open; O_NONBLOCK is
// a property of the open pipe that the duplicate shares, so it is set back
// when done. Anything else (a file, a terminal, a reader that is no
// *os.File) is returned as it is, and so is a socket that is also out (one
// socket as a client's stdin and stdout, as socat's EXEC or inetd give):
// out would share the mode, and a write to it that does not fit at once
// would fail instead of waiting.
func pollableInput(in io.Reader, out io.Writer) (io.Reader, func()) {
	f, ok := in.(*os.File)
	if !ok || sameFile(f, out) {
		return in, func() {}
	}
	pf, restore := pollableDup(f)
	if pf == nil {
		return in, func() {}
	}
	return fdmode.Reader(pf), restore
}

// pollableOutput returns a writer of out that writes what the pipe takes at
// once with a raw system call and waits in the runtime's poller for the
// rest, and a function that undoes it, when out is a pipe or socket in
// blocking mode (a client's pipe from the proxy's stdout); see
// fdmode.Reader for why a raw call. The descriptor is duplicated and set
// non-blocking as pollableInput does, and the same exceptions apply: out
// is returned as it is when it is no such *os.File, or is the same file as
// the proxy's stdin (whose reads would see the mode) or its stderr (whose
// log lines could fail instead of waiting).
func pollableOutput(out io.Writer, in io.Reader, stderr io.Writer) (io.Writer, func()) {
	f, ok := out.(*os.File)
	if !ok || sameFile(f, in) || sameFile(f, stderr) {
		return out, func() {}
	}
	pf, restore := pollableDup(f)
	if pf == nil {
		return out, func() {}
	}
	return fdmode.Writer(pf), restore
}

// pollableDup returns a non-blocking duplicate of f for the poller, and a
// function that closes it and sets f back to blocking mode, when f is a
// pipe or socket in blocking mode; else nil. O_NONBLOCK is a property of
// the open pipe that the duplicate shares, hence the setting back.
func pollableDup(f *os.File) (*os.File, func()) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil
	}
	dup := -1
	_ = rc.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if syscall.Fstat(int(fd), &st) != nil {
			return
		}
		if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
			return
		}
		if fdmode.IsNonBlocking(fd) {
			return // already pollable, or set so by its owner: leave it
		}
		d, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
		if errno != 0 {
			return
		}
		if syscall.SetNonblock(int(d), true) != nil {
			_ = syscall.Close(int(d))
			return
		}
		dup = int(d)
	})
	if dup < 0 {
		return nil, nil
	}
	pf := os.NewFile(uintptr(dup), f.Name()) // non-blocking: the poller takes it
	return pf, func() {
		// Close first: it wakes a read waiting in the poller and returns
		// once no read is in flight, and none starts after it. Set back
		// to blocking before, a read that started in between would block
		// in the kernel, and Close wait for it, until the client wrote.
		_ = pf.Close()
		_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
}

// sameFile reports whether w is an *os.File for the same file as f.
func sameFile(f *os.File, w any) bool {
	o, ok := w.(*os.File)
	if !ok {
		return false
	}
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := o.Stat()
	return err == nil && os.SameFile(a, b)
}
