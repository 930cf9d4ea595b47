package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
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
	outR, outW := io.Pipe()
	tr := newStdioTransport(newLineReader(outR, 1<<20), inW, zerolog.Nop())
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tr.Close()
		_ = outW.Close()
		_ = inR.Close()
	})
	return tr, &pipeChild{in: bufio.NewReader(inR), out: outW}
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
	resp *transport.JSONRPCResponse
	err  error
}

func sendAsync(tr *stdioTransport, ctx context.Context, id string) <-chan sent {
	ch := make(chan sent, 1)
	go func() {
		r, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: "tools/call"})
		ch <- sent{r, err}
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
		if string(s.resp.Result) != c.want || s.resp.Error != nil {
			t.Errorf("result %q (error %v), want %q", s.resp.Result, s.resp.Error, c.want)
		}
	}
}

func TestStdioTransportErrorResponse(t *testing.T) {
	tr, child := newPipeTransport(t)
	ch := sendAsync(tr, context.Background(), "e")
	child.read(t)
	child.write(t, `{"jsonrpc":"2.0","id":"e","error":{"code":-32602,"message":"bad args","data":{"k":1}}}`)
	s := wait(t, ch)
	if s.err != nil || s.resp.Error == nil || s.resp.Error.Code != -32602 || s.resp.Error.Message != "bad args" || s.resp.Result != nil {
		t.Fatalf("got %+v, %v", s.resp, s.err)
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
	if s := wait(t, ch); s.err != nil || string(s.resp.Result) != "{}" {
		t.Fatalf("got %+v, %v", s.resp, s.err)
	}
}

func TestStdioTransportNotificationsAndRequests(t *testing.T) {
	tr, child := newPipeTransport(t)
	notes := make(chan mcp.JSONRPCNotification, 1)
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) { notes <- n })
	child.write(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"k":"v"}}`)
	select {
	case n := <-notes:
		if n.Method != "notifications/tools/list_changed" || n.Params.AdditionalFields["k"] != "v" {
			t.Errorf("notification %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}

	// Without a handler a request gets method not found.
	child.write(t, `{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
	if m := child.read(t); string(m["id"]) != "7" || !strings.Contains(string(m["error"]), `-32601`) {
		t.Errorf("answer %s", m)
	}
	tr.SetRequestHandler(func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{"roots":[]}`)), nil
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
	if s := wait(t, ch); !errors.Is(s.err, transport.ErrTransportClosed) {
		t.Fatalf("err = %v, want ErrTransportClosed", s.err)
	}
	if _, err := tr.SendRequest(context.Background(), transport.JSONRPCRequest{ID: mcp.NewRequestId("y")}); !errors.Is(err, transport.ErrTransportClosed) {
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
	if s := wait(t, ch); s.err != nil || string(s.resp.Result) != `{"d":1}` {
		t.Fatalf("got %+v, %v", s.resp, s.err)
	}
}

// A child that stops reading its stdin blocks writes; a request still ends
// with its context. When nothing of the line went out the transport goes
// on; when part of it did, the child's input is torn and stdin is closed.
func TestStdioTransportWriteEndsWithContext(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW := io.Pipe()
	defer outW.Close()
	tr := newStdioTransport(newLineReader(outR, 1<<20), inW, zerolog.Nop())
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !tr.ctxWrites() {
		t.Fatal("an os.Pipe stdin does not take write deadlines")
	}
	request := func(params string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId("r"), Method: "x", Params: json.RawMessage(params)})
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
// is transport.ErrTransportClosed, so that callers wait for the session to
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
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, ctx := range []context.Context{context.Background(), testContext(t)} {
		_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId("r"), Method: "x"})
		if !errors.Is(err, transport.ErrTransportClosed) {
			t.Errorf("request to a gone child: %v, want transport.ErrTransportClosed", err)
		}
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}
