package fdmode

import (
	"io"
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

// NowaitWriter writes to a descriptor in non-blocking mode what it takes
// without waiting. It is for one writer at a time: the bytes and the
// outcome are its fields and the callback the descriptor runs is bound
// once, so a write allocates nothing.
type NowaitWriter struct {
	rc      syscall.RawConn
	writeFn func(fd uintptr) bool
	b       []byte
	n       int
}

// NewNowaitWriter returns a NowaitWriter of w when w is an *os.File in
// non-blocking mode (see Conn), else nil.
func NewNowaitWriter(w any) *NowaitWriter {
	rc := Conn(w)
	if rc == nil {
		return nil
	}
	t := &NowaitWriter{rc: rc}
	t.writeFn = t.writeOnce
	return t
}

func (t *NowaitWriter) writeOnce(fd uintptr) bool {
	t.n = WriteNonBlocking(fd, t.b)
	return true // never wait here
}

// TryWrite writes as much of b as the descriptor takes without waiting,
// and returns how much that was: 0 for a nil t or a closed file (the
// caller's waiting write then says why).
func (t *NowaitWriter) TryWrite(b []byte) int {
	if t == nil || len(b) == 0 {
		return 0
	}
	t.b, t.n = b, 0
	_ = t.rc.Write(t.writeFn)
	t.b = nil
	return t.n
}

// Writer returns a writer of f that first writes what the pipe takes at
// once (TryWrite) and then waits in the runtime's poller for the rest,
// when f is pollable (a pipe or socket in non-blocking mode); else f
// itself.
func Writer(f *os.File) io.Writer {
	t := NewNowaitWriter(f)
	if t == nil {
		return f
	}
	return &rawFirstWriter{f: f, t: t}
}

type rawFirstWriter struct {
	f *os.File
	t *NowaitWriter
}

func (w *rawFirstWriter) Write(b []byte) (int, error) {
	n := w.t.TryWrite(b)
	if n == len(b) {
		return n, nil
	}
	m, err := w.f.Write(b[n:]) // also says why when the file is closed
	return n + m, err
}
