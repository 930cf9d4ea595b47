//go:build unix

package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/fdmode"
)

// A client's pipe opened in blocking mode is read through the poller while
// the session runs, and is left open and blocking again afterwards; a
// regular file is read as it is.
func TestPollableInput(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r := os.NewFile(uintptr(fds[0]), "stdin") // blocking, as a client's pipe is
	w := os.NewFile(uintptr(fds[1]), "client")
	defer r.Close()
	defer w.Close()
	if fdmode.IsNonBlocking(uintptr(fds[0])) {
		t.Fatal("the test pipe is not in blocking mode")
	}
	in, restore := pollableInput(r, io.Discard)
	if in == io.Reader(r) {
		t.Fatal("a blocking pipe was not made pollable")
	}
	if !fdmode.IsNonBlocking(uintptr(fds[0])) {
		t.Error("the pipe is not in non-blocking mode while served")
	}
	if _, err := w.WriteString("line 1\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := in.Read(buf); err != nil || string(buf[:n]) != "line 1\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	restore()
	if fdmode.IsNonBlocking(uintptr(fds[0])) {
		t.Error("the pipe was left in non-blocking mode")
	}
	if _, err := w.WriteString("line 2\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "line 2\n" {
		t.Fatalf("the original stdin after restore: read %q, %v", buf[:n], err)
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "requests"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if in, restore := pollableInput(f, io.Discard); in != io.Reader(f) {
		t.Error("a regular file was replaced")
	} else {
		restore()
	}
}

// A client that gives the proxy one socket as both stdin and stdout (socat's
// EXEC, inetd, a systemd socket unit) shares one open file, and so one
// O_NONBLOCK, between them: stdout stays in blocking mode, and a response
// larger than the socket's buffer reaches a client that reads it late whole.
func TestServeStdioSocketAsStdinAndStdout(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	outFD, err := syscall.Dup(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	// Blocking, as a child's inherited descriptors 0 and 1 are.
	stdin, stdout := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(outFD), "stdout")
	client := os.NewFile(uintptr(fds[1]), "client")
	defer stdin.Close()
	defer stdout.Close()
	defer client.Close()

	text := strings.Repeat("z", 1<<20)
	fx := connected(echoTool)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	served := make(chan error, 1)
	go func() { served <- p.ServeStdio(context.Background(), "", nil, stdin, stdout) }()

	if _, err := client.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the socket's buffer fills before the client reads
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReaderSize(client, 64<<10).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, `"id":1,"result"`) || !strings.Contains(line, text) {
			t.Errorf("the client read %d bytes, not the whole response", len(line))
		}
	case <-time.After(10 * time.Second):
		t.Error("the response did not arrive whole")
	}
	_ = syscall.Shutdown(fds[1], syscall.SHUT_WR)
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeStdio = %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ServeStdio did not return after stdin closed")
	}
}

// restore ends a read in flight and returns, also when the client writes
// until the moment it runs and then goes quiet (a signal while lines come
// in): no read of the pipe may be left waiting in blocking mode.
func TestPollableInputRestoreDuringReads(t *testing.T) {
	for i := range 300 {
		var fds [2]int
		if err := syscall.Pipe(fds[:]); err != nil {
			t.Fatal(err)
		}
		r := os.NewFile(uintptr(fds[0]), "stdin")
		w := os.NewFile(uintptr(fds[1]), "client")
		in, restore := pollableInput(r, io.Discard)
		var quiet atomic.Bool
		go func() {
			for !quiet.Load() {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			buf := make([]byte, 1)
			for {
				if _, err := in.Read(buf); err != nil {
					return
				}
			}
		}()
		time.Sleep(time.Duration(i%20) * 10 * time.Microsecond)
		restored := make(chan struct{})
		go func() { quiet.Store(true); restore(); close(restored) }()
		select {
		case <-restored:
		case <-time.After(2 * time.Second):
			t.Errorf("round %d: restore did not return while the client was quiet", i)
		}
		_ = w.Close() // ends a read stuck in blocking mode
		<-restored
		<-readerDone
		_ = r.Close()
		if t.Failed() {
			return
		}
	}
}
