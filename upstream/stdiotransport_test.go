package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
)

// pipeChild is the child's end of a stdioTransport under test: what the
// transport writes, line by line, and a writer for the child's stdout.
type pipeChild struct {
	in  *bufio.Reader  // the transport's stdin
	out *io.PipeWriter // the transport's stdout
}

func newPipeTransport(t *testing.T) (*stdioTransport, *pipeChild) {
	t.Helper()
	inR, inW := io.Pipe()
	tr, outW := startTestTransport(t, inW, inR)
	return tr, &pipeChild{in: bufio.NewReader(inR), out: outW}
}

// newOSPipeTransport is a started transport whose stdin is an os.Pipe (as a
// child's is) that nobody reads but the test, through the returned end; its
// stdout never gets a line. Everything is closed at the end of the test.
func newOSPipeTransport(t *testing.T) (*stdioTransport, *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := startTestTransport(t, inW, inR)
	return tr, inR
}

// startTestTransport starts a transport writing to stdin, whose stdout is
// the returned pipe; at the end of the test it closes the transport, that
// pipe and stdinR (the child's end of stdin).
func startTestTransport(t *testing.T, stdin io.WriteCloser, stdinR io.Closer) (*stdioTransport, *io.PipeWriter) {
	t.Helper()
	outR, outW := io.Pipe()
	tr := newStdioTransport(newLineReader(outR, 1<<20), stdin, zerolog.Nop())
	tr.start(context.Background())
	t.Cleanup(func() {
		_ = tr.Close()
		_ = outW.Close()
		_ = stdinR.Close()
	})
	return tr, outW
}

func (c *pipeChild) write(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(c.out, l+"\n"); err != nil {
			t.Error(err)
		}
	}
}

func (c *pipeChild) read(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	line, err := c.in.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return m
}

type sent struct {
	result json.RawMessage
	rpcErr *mcp.JSONRPCErrorDetails
	err    error
}

func sendAsync(tr *stdioTransport, ctx context.Context, id string) <-chan sent {
	ch := make(chan sent, 1)
	go func() {
		r, e, err := tr.call(ctx, id, "tools/call", nil, nil)
		ch <- sent{r, e, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan sent) sent {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
		return sent{}
	}
}

func TestStdioTransportRoutesResultBytes(t *testing.T) {
	tr, child := newPipeTransport(t)
	a, b := sendAsync(tr, context.Background(), "a"), sendAsync(tr, context.Background(), "b")
	child.read(t)
	child.read(t)
	// Out of order, with a line that is not JSON in between, CRLF line ends
	// and result bytes that a decode would change.
	resB := `{ "n": 12345678901234567890123, "s": "\u00e9\ud83d\ude00", "x": [1.50, {}] }`
	child.write(t, "not json at all", `{"id":"b","jsonrpc":"2.0","result":`+resB+"}\r")
	child.write(t, `{"jsonrpc":"2.0","result":{"ok":true},"id":"a"}`)
	for _, c := range []struct {
		ch   <-chan sent
		want string
	}{{b, resB}, {a, `{"ok":true}`}} {
		s := wait(t, c.ch)
		if s.err != nil {
			t.Fatal(s.err)
		}
		if string(s.result) != c.want || s.rpcErr != nil {
			t.Errorf("result %q (error %v), want %q", s.result, s.rpcErr, c.want)
		}
	}
}

func TestStdioTransportErrorResponse(t *testing.T) {
	tr, child := newPipeTransport(t)
	ch := sendAsync(tr, context.Background(), "e")
	child.read(t)
	child.write(t, `{"jsonrpc":"2.0","id":"e","error":{"code":-32602,"message":"bad args","data":{"k":1}}}`)
	s := wait(t, ch)
	if s.err != nil || s.rpcErr == nil || s.rpcErr.Code != -32602 || s.rpcErr.Message != "bad args" || s.result != nil {
		t.Fatalf("got %s %+v, %v", s.result, s.rpcErr, s.err)
	}
}

// A response that is not valid JSON fails its request at once, clearly,
// instead of leaving it to time out.
func TestStdioTransportInvalidResponseFailsRequest(t *testing.T) {
	tr, child := newPipeTransport(t)
	ch := sendAsync(tr, context.Background(), "v")
	child.read(t)
	child.write(t, `{"jsonrpc":"2.0","id":"v","result":{"text":"unterminated}}`)
	s := wait(t, ch)
	if !errors.Is(s.err, ErrBadResponse) || !strings.Contains(s.err.Error(), "invalid JSON") {
		t.Fatalf("err = %v, want ErrBadResponse (invalid JSON)", s.err)
	}
	// The connection goes on.
	ch = sendAsync(tr, context.Background(), "w")
	child.read(t)
	child.write(t, `{"jsonrpc":"2.0","id":"w","result":{}}`)
	if s := wait(t, ch); s.err != nil || string(s.result) != "{}" {
		t.Fatalf("got %s %+v, %v", s.result, s.rpcErr, s.err)
	}
}

func TestStdioTransportNotificationsAndRequests(t *testing.T) {
	tr, child := newPipeTransport(t)
	type note struct {
		method string
		params json.RawMessage
	}
	notes := make(chan note, 1)
	tr.setRawNotificationHandler(func(method string, params json.RawMessage) { notes <- note{method, params} })
	child.write(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"k":"v"}}`)
	select {
	case n := <-notes:
		if n.method != "notifications/tools/list_changed" || string(n.params) != `{"k":"v"}` {
			t.Errorf("notification %s %s", n.method, n.params)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}

	// Without a handler a request gets method not found.
	child.write(t, `{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
	if m := child.read(t); string(m["id"]) != "7" || !strings.Contains(string(m["error"]), `-32601`) {
		t.Errorf("answer %s", m)
	}
	tr.setRequestHandler(func(_ context.Context, req serverRequest) []byte {
		return resultReply(req.id, json.RawMessage(`{"roots":[]}`))
	})
	child.write(t, `{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`)
	if m := child.read(t); string(m["id"]) != `"r1"` || string(m["result"]) != `{"roots":[]}` {
		t.Errorf("answer %s", m)
	}
}

func TestStdioTransportEOF(t *testing.T) {
	tr, child := newPipeTransport(t)
	ch := sendAsync(tr, context.Background(), "x")
	child.read(t)
	_ = child.out.Close()
	if s := wait(t, ch); !errors.Is(s.err, errTransportClosed) {
		t.Fatalf("err = %v, want ErrTransportClosed", s.err)
	}
	if _, _, err := tr.call(context.Background(), "y", "x", nil, nil); !errors.Is(err, errTransportClosed) {
		t.Fatalf("after EOF: %v", err)
	}
}

func TestStdioTransportCancel(t *testing.T) {
	tr, child := newPipeTransport(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := sendAsync(tr, ctx, "c")
	child.read(t)
	cancel()
	if s := wait(t, ch); !errors.Is(s.err, context.Canceled) {
		t.Fatalf("err = %v", s.err)
	}
	// A late answer is dropped without harm.
	child.write(t, `{"jsonrpc":"2.0","id":"c","result":{}}`)
	ch = sendAsync(tr, context.Background(), "d")
	child.read(t)
	child.write(t, `{"jsonrpc":"2.0","id":"d","result":{"d":1}}`)
	if s := wait(t, ch); s.err != nil || string(s.result) != `{"d":1}` {
		t.Fatalf("got %s %+v, %v", s.result, s.rpcErr, s.err)
	}
}

// A child that stops reading its stdin blocks writes; a request still ends
// with its context. When nothing of the line went out the transport goes
// on; when part of it did, the child's input is torn and stdin is closed.
func TestStdioTransportWriteEndsWithContext(t *testing.T) {
	tr, inR := newOSPipeTransport(t)
	if !tr.ctxWrites() {
		t.Fatal("an os.Pipe stdin does not take write deadlines")
	}
	request := func(params string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		_, _, err := tr.call(ctx, "r", "x", json.RawMessage(params), nil)
		if d := time.Since(start); d > timeout+2*time.Second {
			t.Errorf("request returned %v after a %v timeout", d, timeout)
		}
		return err
	}
	// Fill the pipe exactly, in whole lines nobody reads: the next write
	// blocks before writing anything.
	big := `{"pad":"` + strings.Repeat("x", 4000) + `"}`
	for {
		if err := request(big, 200*time.Millisecond); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("blocked request: %v, want the context's deadline", err)
			}
			break
		}
	}
	// A line longer than the pipe's buffer is written in part, then cut.
	huge := `{"pad":"` + strings.Repeat("y", 1<<20) + `"}`
	if _, err := inR.Read(make([]byte, 64<<10)); err != nil { // room for part of it
		t.Fatal(err)
	}
	if err := request(huge, 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("torn request: %v, want the context's deadline", err)
	}
	if err := request(`{}`, time.Second); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after a torn line: %v, want a closed stdin", err)
	}
}

// A write to a child whose stdin is gone ends like its stdout: the error
// is errTransportClosed, so that callers wait for the session to
// say why (the child's exit) rather than report a broken pipe.
func TestStdioTransportWriteToGoneChild(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = inR.Close() // the child is gone
	outR, outW := io.Pipe()
	defer outW.Close()
	tr := newStdioTransport(newLineReader(outR, 1<<20), inW, zerolog.Nop())
	tr.start(context.Background())
	defer tr.Close()
	for _, ctx := range []context.Context{context.Background(), testContext(t)} {
		_, _, err := tr.call(ctx, "r", "x", nil, nil)
		if !errors.Is(err, errTransportClosed) {
			t.Errorf("request to a gone child: %v, want errTransportClosed", err)
		}
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestStdioTransportFloodBounded is issue 12, item 8, at the transport: a
// child that sends 20,000 requests and never reads its stdin costs the proxy
// a bounded number of goroutines and little memory while it floods, and once
// no write has made progress for the stall timeout the transport closes and
// reports the child as hung. Pings are answered on the read loop; requests
// whose handler waits (a sampling request waiting for the client) hold at
// most maxServerRequests goroutines, and the rest are refused at once.
func TestStdioTransportFloodBounded(t *testing.T) {
	for _, method := range []string{"ping", "sampling/createMessage"} {
		t.Run(method, func(t *testing.T) { floodTransport(t, method) })
	}
}

func floodTransport(t *testing.T, method string) {
	inR, inW, err := os.Pipe() // the child's stdin: read only at the end
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	tr := newStdioTransport(newLineReader(outR, 1<<20), inW, zerolog.Nop())
	tr.stallTimeout = 2 * time.Second
	stalled := make(chan error, 1)
	tr.onStall = func(err error) { stalled <- err }
	release := make(chan struct{})
	defer close(release)
	tr.setRequestHandler(func(ctx context.Context, req serverRequest) []byte {
		if req.method != "ping" {
			<-release // waits for a client that never answers
		}
		return resultReply(req.id, json.RawMessage(`{}`))
	})
	idle := runtime.NumGoroutine()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr.start(context.Background())
	defer tr.Close()

	flooded := make(chan int, 1)
	go func() {
		defer outW.Close()
		n := 0
		for ; n < 20000; n++ {
			if _, err := fmt.Fprintf(outW, `{"jsonrpc":"2.0","id":"flood-%d","method":%q}`+"\n", n, method); err != nil {
				break // the transport closed its end
			}
		}
		flooded <- n
	}()
	peak := 0
	var peakHeap uint64
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case err := <-stalled:
			if !errors.Is(err, errStdinStalled) {
				t.Errorf("onStall got %v, want errStdinStalled", err)
			}
			done = true
		case <-deadline:
			t.Fatal("the transport did not report the child as hung")
		case <-time.After(20 * time.Millisecond):
		}
		peak = max(peak, runtime.NumGoroutine())
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
	}
	if limit := idle + maxServerRequests + 10; peak > limit {
		t.Errorf("goroutines peaked at %d, %d above the %d before the flood", peak, peak-idle, idle)
	}
	if grown := int64(peakHeap) - int64(before.HeapInuse); grown > 20<<20 {
		t.Errorf("heap in use grew by %d bytes during the flood", grown)
	}
	select {
	case <-tr.done:
	default:
		t.Error("the transport of a hung child is still open")
	}
	if method != "ping" {
		// What the child would have read: refusals of the excess, at once.
		line, err := bufio.NewReader(inR).ReadString('\n')
		if err != nil || !strings.Contains(line, tooManyServerRequests) {
			t.Errorf("first answer to the flood: %q, %v; want the refusal %q", line, err, tooManyServerRequests)
		}
	}
	_ = outR.Close() // the flooding child's pipe breaks
	select {
	case n := <-flooded:
		if n == 20000 {
			t.Errorf("the child wrote all its requests: the proxy took them without answering or stalling")
		}
	case <-time.After(5 * time.Second):
		t.Error("the flooding child is still blocked")
	}
	t.Logf("goroutines: idle %d, peak %d; heap grew %d KiB", idle, peak, (int64(peakHeap)-int64(before.HeapInuse))>>10)
}

// call writes the request line as it builds it, params byte for byte, and
// routes the answer by its id's bytes: a result comes back as the child
// wrote it, an error member as the error, each to its own caller.
func TestStdioTransportCallWritesLineAsBuilt(t *testing.T) {
	tr, child := newPipeTransport(t)
	type answer struct {
		result json.RawMessage
		rpcErr *mcp.JSONRPCErrorDetails
		err    error
	}
	callAsync := func(id, method, params string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, rpcErr, err := tr.call(context.Background(), id, method, json.RawMessage(params), nil)
			ch <- answer{res, rpcErr, err}
		}()
		return ch
	}
	params := `{"name":"t","arguments":{"n":1.50,"big":12345678901234567890123}}`
	a := callAsync("px-7", "tools/call", params)
	line, err := child.in.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":"px-7","method":"tools/call","params":` + params + "}\n"; line != want {
		t.Fatalf("request line %q\nwant %q", line, want)
	}
	b := callAsync("px-8", "ping", "")
	if line, _ := child.in.ReadString('\n'); line != `{"jsonrpc":"2.0","id":"px-8","method":"ping"}`+"\n" {
		t.Fatalf("request line without params %q", line)
	}
	child.write(t, `{"jsonrpc":"2.0","id":"px-8","error":{"code":-32601,"message":"no"}}`,
		`{"id":"px-7","result":{ "x": 1.50 },"jsonrpc":"2.0"}`)
	for _, c := range []struct {
		ch     <-chan answer
		result string
		code   int
	}{{a, `{ "x": 1.50 }`, 0}, {b, "", -32601}} {
		var got answer
		select {
		case got = <-c.ch:
		case <-time.After(5 * time.Second):
			t.Fatal("no answer within 5s")
		}
		switch {
		case got.err != nil:
			t.Errorf("error %v", got.err)
		case string(got.result) != c.result:
			t.Errorf("result %q, want %q", got.result, c.result)
		case c.code != 0 && (got.rpcErr == nil || got.rpcErr.Code != c.code || got.rpcErr.Message != "no"):
			t.Errorf("error member %+v, want code %d", got.rpcErr, c.code)
		case c.code == 0 && got.rpcErr != nil:
			t.Errorf("unexpected error member %+v", got.rpcErr)
		}
	}
}

// A line longer than the pipe's buffer goes out whole to a child that reads
// it late: first what the pipe takes at once, then the rest as the child
// reads.
func TestStdioTransportLongLineToSlowReader(t *testing.T) {
	tr, inR := newOSPipeTransport(t)
	if tr.rawStdin == nil {
		t.Fatal("an os.Pipe stdin is not written directly")
	}
	params := `{"pad":"` + strings.Repeat("z", 300<<10) + `"}`
	got := make(chan string, 1)
	go func() {
		time.Sleep(100 * time.Millisecond) // the pipe fills first
		line, _ := bufio.NewReader(inR).ReadString('\n')
		got <- line
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { _, _, _ = tr.call(ctx, "px-1", "x", json.RawMessage(params), nil) }()
	select {
	case line := <-got:
		if want := `{"jsonrpc":"2.0","id":"px-1","method":"x","params":` + params + "}\n"; line != want {
			t.Errorf("the child read %d bytes, want the %d-byte line", len(line), len(want))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the line did not arrive")
	}
}

// Params with line breaks between their tokens (a pretty-printed body of an
// HTTP client, relayed as its bytes) still go out as one line: the child
// reads each line as one message, and a torn request is never answered.
func TestStdioTransportCallParamsWithLineBreaks(t *testing.T) {
	tr, child := newPipeTransport(t)
	params := "{\r\n  \"name\": \"t\",\n  \"arguments\": {\"s\": \"a\\nb\"}\n}"
	done := make(chan error, 1)
	go func() {
		_, _, err := tr.call(context.Background(), "px-1", "tools/call", json.RawMessage(params), nil)
		done <- err
	}()
	m := child.read(t)
	var p struct {
		Name      string
		Arguments struct{ S string }
	}
	if err := json.Unmarshal(m["params"], &p); err != nil || p.Name != "t" || p.Arguments.S != "a\nb" {
		t.Fatalf("params %s (%v)", m["params"], err)
	}
	child.write(t, `{"jsonrpc":"2.0","id":"px-1","result":{}}`)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
	}
}

// With a raw handler a notification's params come as the child wrote them;
// params that are not one object, or name a member twice, drop it.
func TestStdioTransportRawNotifications(t *testing.T) {
	tr, child := newPipeTransport(t)
	type rawNote struct {
		method string
		params json.RawMessage
	}
	notes := make(chan rawNote, 4)
	tr.setRawNotificationHandler(func(method string, params json.RawMessage) { notes <- rawNote{method, params} })
	child.write(t, `{"jsonrpc":"2.0","method":"a","params":[1]}`)
	child.write(t, `{"jsonrpc":"2.0","method":"b","params":{"k":1,"k":2}}`)
	child.write(t, `{"jsonrpc":"2.0","method":"c"}`)
	child.write(t, `{"jsonrpc":"2.0","method":"d","params":{"z":1e400, "a":"<"}}`)
	for _, want := range []rawNote{{"c", nil}, {"d", json.RawMessage(`{"z":1e400, "a":"<"}`)}} {
		select {
		case n := <-notes:
			if n.method != want.method || string(n.params) != string(want.params) || (n.params == nil) != (want.params == nil) {
				t.Errorf("notification %s %s, want %s %s", n.method, n.params, want.method, want.params)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no notification")
		}
	}
}

// TestStdioTransportEndedFailsRequests: when the session that owns the
// transport dies before the transport is closed, a request waiting for its
// answer and one waiting for its turn to write (behind a write the child
// does not read) fail at once with errSessionEnded; the transport itself
// is still open.
func TestStdioTransportEndedFailsRequests(t *testing.T) {
	inR, inW, err := os.Pipe() // the child's stdin, which it never reads
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe() // the child's stdout, which never answers
	defer outW.Close()
	tr := newStdioTransport(newLineReader(outR, 1<<20), inW, zerolog.Nop())
	tr.stallTimeout = time.Minute // the blocked write must outlast the test
	ended := make(chan struct{})
	tr.ended = ended
	tr.start(context.Background())
	defer tr.Close()
	ctx := testContext(t)
	type outcome struct {
		name string
		err  error
	}
	done := make(chan outcome, 3)
	call := func(name string, params json.RawMessage) {
		_, _, err := tr.call(ctx, name, "tools/call", params, nil)
		done <- outcome{name, err}
	}
	go call("answer", json.RawMessage(`{"name":"a"}`))
	waitFor(t, 5*time.Second, "the first request written", func() bool {
		tr.pending.mu.Lock()
		defer tr.pending.mu.Unlock()
		return len(tr.pending.m) == 1
	})
	// A line longer than the pipe holds: its write blocks, holding the turn.
	big := json.RawMessage(`{"name":"b","arguments":{"x":"` + strings.Repeat("x", 1<<20) + `"}}`)
	go call("blocked", big)
	waitFor(t, 5*time.Second, "the long write under way", func() bool { return len(tr.writeSem) == 1 })
	go call("turn", json.RawMessage(`{"name":"c"}`))
	time.Sleep(50 * time.Millisecond) // the third request waits for its turn

	close(ended)
	got := map[string]error{}
	for range 2 {
		select {
		case o := <-done:
			got[o.name] = o.err
		case <-time.After(5 * time.Second):
			t.Fatalf("requests still waiting 5 s after the session ended: got %v", got)
		}
	}
	for _, name := range []string{"answer", "turn"} {
		if err, ok := got[name]; !ok || !errors.Is(err, errSessionEnded) {
			t.Errorf("request %q: %v (returned %t); want errSessionEnded", name, err, ok)
		}
	}
	select {
	case <-tr.done:
		t.Error("the transport closed; the session's end alone should fail the requests")
	default:
	}
	_ = inR.Close() // the blocked write fails now
	<-done
}
