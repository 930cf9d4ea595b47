//go:build unix

package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
// the session runs, and is left open and blocking again afterwards.
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
}

// A regular file as stdin or stdout is used as it is.
func TestPollableRegularFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stdio"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, restoreIn := pollableInput(f, io.Discard)
	defer restoreIn()
	out, restoreOut := pollableOutput(f, nil, nil)
	defer restoreOut()
	if in != io.Reader(f) || out != io.Writer(f) {
		t.Error("a regular file was replaced")
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

	serveLargeResponse(t, stdin, stdout, client, client, func() { _ = syscall.Shutdown(fds[1], syscall.SHUT_WR) })
	if fdmode.IsNonBlocking(uintptr(outFD)) {
		t.Error("the socket was left in non-blocking mode")
	}
}

// serveLargeResponse serves a proxy whose tool answers with 1 MiB of text
// on stdin and stdout, sends one call on toProxy, lets the response fill
// the pipe or socket before reading it from fromProxy, and checks that it
// arrives whole; endInput then ends the client's input, after which
// ServeStdio must return.
func serveLargeResponse(t *testing.T, stdin, stdout *os.File, toProxy io.Writer, fromProxy io.Reader, endInput func()) {
	t.Helper()
	text := strings.Repeat("z", 1<<20)
	fx := connected(echoTool)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	served := make(chan error, 1)
	go func() { served <- p.ServeStdio(context.Background(), "", nil, stdin, stdout) }()

	if _, err := io.WriteString(toProxy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the buffer fills before the client reads
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReaderSize(fromProxy, 64<<10).ReadString('\n')
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
	endInput()
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

// A client's pipe from the proxy's stdout, opened in blocking mode, is
// written through a non-blocking duplicate while the session runs: a write
// larger than the pipe holds waits for the client to read and arrives whole,
// and afterwards the pipe is blocking again and still open. A pipe that is
// also one of the shared files (stdin, stderr) is written as it is.
func TestPollableOutput(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	client := os.NewFile(uintptr(fds[0]), "client")
	stdout := os.NewFile(uintptr(fds[1]), "stdout") // blocking, as a client's pipe is
	defer client.Close()
	defer stdout.Close()
	if sameOut, restore := pollableOutput(stdout, strings.NewReader(""), stdout); sameOut != io.Writer(stdout) {
		t.Error("a pipe shared with another stream was replaced")
	} else {
		restore()
	}
	out, restore := pollableOutput(stdout, strings.NewReader(""), io.Discard)
	if out == io.Writer(stdout) {
		t.Fatal("a blocking pipe was not made pollable")
	}
	if !fdmode.IsNonBlocking(uintptr(fds[1])) {
		t.Error("the pipe is not in non-blocking mode while served")
	}
	big := strings.Repeat("b", 1<<20) + "\n" // 16 times a pipe's default capacity
	wrote := make(chan error, 1)
	go func() {
		n, err := out.Write([]byte(big))
		if err == nil && n != len(big) {
			err = io.ErrShortWrite
		}
		wrote <- err
	}()
	time.Sleep(50 * time.Millisecond) // the pipe fills before the client reads
	line, err := bufio.NewReaderSize(client, 64<<10).ReadString('\n')
	if err != nil || line != big {
		t.Fatalf("the client read %d bytes (%v), want %d", len(line), err, len(big))
	}
	if err := <-wrote; err != nil {
		t.Fatalf("Write = %v", err)
	}
	restore()
	if fdmode.IsNonBlocking(uintptr(fds[1])) {
		t.Error("the pipe was left in non-blocking mode")
	}
	if _, err := out.Write([]byte("late\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a write after restore = %v, want os.ErrClosed", err)
	}
	if _, err := stdout.WriteString("after\n"); err != nil {
		t.Fatalf("the original stdout after restore: %v", err)
	}
	buf := make([]byte, 16)
	if n, err := client.Read(buf); err != nil || string(buf[:n]) != "after\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}

}

// Through ServeStdio with separate pipes, as a host spawns the proxy: a
// response larger than the pipe, read late, arrives whole, and both pipes
// are in blocking mode again when ServeStdio returns.
func TestServeStdioPipesLargeResponse(t *testing.T) {
	stdin, toProxy, fromProxy, stdout := hostPipes(t)
	serveLargeResponse(t, stdin, stdout, toProxy, fromProxy, func() { _ = toProxy.Close() })
	if fdmode.Conn(stdin) != nil || fdmode.Conn(stdout) != nil { // reads the mode without changing it (os.File.Fd could)
		t.Error("a pipe was left in non-blocking mode")
	}
}

// hostPipes makes the two pipes a host gives a stdio server, in blocking
// mode, closed when the test ends.
func hostPipes(t *testing.T) (stdin, toProxy, fromProxy, stdout *os.File) {
	var in, out [2]int
	if err := syscall.Pipe(in[:]); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Pipe(out[:]); err != nil {
		t.Fatal(err)
	}
	stdin, toProxy = os.NewFile(uintptr(in[0]), "stdin"), os.NewFile(uintptr(in[1]), "to-proxy")
	fromProxy, stdout = os.NewFile(uintptr(out[0]), "from-proxy"), os.NewFile(uintptr(out[1]), "stdout")
	for _, f := range []*os.File{stdin, toProxy, fromProxy, stdout} {
		t.Cleanup(func() { _ = f.Close() })
	}
	return stdin, toProxy, fromProxy, stdout
}

// A client that closes its end of the proxy's stdout while leaving stdin
// open ends the session at the next response (the broken pipe), as the
// SIGPIPE of a write to descriptor 1 did.
func TestServeStdioEndsWhenClientStopsReading(t *testing.T) {
	stdin, toProxy, fromProxy, stdout := hostPipes(t)
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected(echoTool)})
	served := make(chan error, 1)
	go func() { served <- p.ServeStdio(context.Background(), "", nil, stdin, stdout) }()
	_ = fromProxy.Close()
	if _, err := toProxy.WriteString(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeStdio = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio went on with no one reading its responses")
	}
}
