package downstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

func TestReadLine(t *testing.T) {
	const max = 8
	long := strings.Repeat("x", 100) // spans several 16-byte buffers
	type step struct {
		line string
		err  error
	}
	tests := []struct {
		name  string
		input string
		steps []step
	}{
		{"at the limit", "12345678\nnext\n", []step{{"12345678", nil}, {"next", nil}, {"", io.EOF}}},
		{"one over", "123456789\nnext\n", []step{{"", errLineTooLong}, {"next", nil}, {"", io.EOF}}},
		{"far over, across buffers", long + "\nnext\n", []step{{"", errLineTooLong}, {"next", nil}, {"", io.EOF}}},
		{"two long lines", long + "\n" + long + "\nok\n", []step{{"", errLineTooLong}, {"", errLineTooLong}, {"ok", nil}}},
		{"crlf", "abc\r\nd\n", []step{{"abc", nil}, {"d", nil}}},
		{"empty lines", "\n\nx\n", []step{{"", nil}, {"", nil}, {"x", nil}}},
		{"last line without newline", "ab\ncd", []step{{"ab", nil}, {"cd", io.EOF}}},
		{"empty input", "", []step{{"", io.EOF}}},
		{"long line at EOF", long, []step{{"", errLineTooLong}, {"", io.EOF}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.input), 16)
			for i, s := range tt.steps {
				line, err := readLine(br, max)
				if string(line) != s.line || !errors.Is(err, s.err) || (s.err == nil && err != nil) {
					t.Fatalf("step %d: readLine = %q, %v; want %q, %v", i, line, err, s.line, s.err)
				}
			}
		})
	}
}

// The limit is on the message: neither the line terminator nor the lack of
// one may change which messages pass.
func TestReadLineLimitIsOnTheMessage(t *testing.T) {
	const max = 8
	t.Run("max bytes and CRLF pass", func(t *testing.T) {
		br := bufio.NewReaderSize(strings.NewReader("12345678\r\n"), 16)
		if line, err := readLine(br, max); string(line) != "12345678" || err != nil {
			t.Errorf("readLine = %q, %v; want the 8-byte message", line, err)
		}
	})
	t.Run("max+1 bytes at EOF do not pass", func(t *testing.T) {
		br := bufio.NewReaderSize(strings.NewReader("123456789"), 16)
		if line, err := readLine(br, max); len(line) > max {
			t.Errorf("readLine = %q, %v; a %d-byte line passed a %d-byte limit", line, err, len(line), max)
		}
	})
}

func FuzzReadLine(f *testing.F) {
	f.Add([]byte("abc\ndef\r\n123456789\n"), 8)
	f.Add([]byte(strings.Repeat("y", 40)+"\n"), 16)
	f.Fuzz(func(t *testing.T, input []byte, max int) {
		if max < 1 || max > 1<<10 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(input), 16)
		for i := 0; i <= len(input)+1; i++ {
			line, err := readLine(br, max)
			if len(line) > max+1 {
				t.Fatalf("line of %d bytes with limit %d", len(line), max)
			}
			if bytes.ContainsAny(line, "\n") {
				t.Fatalf("line %q holds a newline", line)
			}
			if err != nil && !errors.Is(err, errLineTooLong) {
				return
			}
		}
		t.Fatal("readLine never reached EOF")
	})
}

// syncBuffer is an io.Writer safe for concurrent use.
type syncBuffer = testproc.Buffer

// lineWriter writes each message as one line, a large one without a copy
// too, and after a failed write fails every later send.
func TestLineWriter(t *testing.T) {
	var out syncBuffer
	w := &lineWriter{out: &out}
	big := `{"jsonrpc":"2.0","id":2,"result":{"text":"` + strings.Repeat("x", pieceMin) + `"}}`
	for _, m := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, big} {
		if err := w.send([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"+big+"\n"; got != want {
		t.Fatalf("output of %d bytes, want %d", len(got), len(want))
	}
}

type failWriter struct{}

var errWriteFailed = errors.New("write failed")

func (failWriter) Write([]byte) (int, error) { return 0, errWriteFailed }

func TestLineWriterReportsWriteErrors(t *testing.T) {
	w := &lineWriter{out: failWriter{}}
	for range 2 {
		if err := w.send([]byte("{}")); !errors.Is(err, errWriteFailed) || !errors.Is(err, errStreamGone) {
			t.Fatalf("send error = %v, want %v and %v", err, errWriteFailed, errStreamGone)
		}
	}
}

// stdioClient drives ServeStdio in-process over pipes.
type stdioClient struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	done  chan error
	mu    sync.Mutex
	seen  []string // every line received, in order
}

func startStdio(t *testing.T, p *Proxy) *stdioClient {
	t.Helper()
	return startStdioCtx(t, p, context.Background())
}

// startStdioCtx is startStdio with ServeStdio's ctx (ending it is the
// proxy's shutdown signal).
func startStdioCtx(t *testing.T, p *Proxy, ctx context.Context) *stdioClient {
	t.Helper()
	return startStdioAs(t, p, ctx, "")
}

// startStdioAs is startStdioCtx for a session of agent ("": the default).
func startStdioAs(t *testing.T, p *Proxy, ctx context.Context, agent string) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{t: t, in: inW, lines: make(chan string, 1000), done: make(chan error, 1)}
	go func() {
		err := p.ServeStdio(ctx, agent, nil, inR, outW)
		outW.Close()
		c.done <- err
	}()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.seen = append(c.seen, sc.Text())
			c.mu.Unlock()
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-c.done:
		case <-time.After(15 * time.Second):
			t.Error("ServeStdio did not return after stdin closed")
		}
		<-readerDone
	})
	return c
}

func (c *stdioClient) send(msg string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, msg+"\n"); err != nil {
		c.t.Fatalf("write to stdin: %v", err)
	}
}

// recv returns the next line that is a response with the given raw id.
func (c *stdioClient) recv(id string) string {
	c.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("stdout closed while waiting for id %s", id)
			}
			if got, isResp := responseID([]byte(line)); isResp && string(got) == id {
				return line
			}
		case <-timeout:
			c.t.Fatalf("no response with id %s", id)
		}
	}
}

// next returns the next line the proxy writes.
func (c *stdioClient) next() string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("stdout closed")
		}
		return line
	case <-time.After(10 * time.Second):
		c.t.Fatal("no line")
	}
	return ""
}

func (c *stdioClient) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	resp := c.recv(`0`)
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(resp), &r); err != nil {
		c.t.Fatalf("initialize response %s: %v", resp, err)
	}
	if r.Result.ProtocolVersion != "2025-11-25" || r.Result.ServerInfo.Name != "mcp-proxy" || r.Result.ServerInfo.Version != "test" {
		c.t.Fatalf("initialize response = %s", resp)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// finish closes stdin and returns every line written and ServeStdio's error.
func (c *stdioClient) finish() ([]string, error) {
	c.t.Helper()
	c.in.Close()
	var err error
	select {
	case err = <-c.done:
		c.done <- err // for the cleanup
	case <-time.After(15 * time.Second):
		c.t.Fatal("ServeStdio did not return after stdin closed")
	}
	for range c.lines { // drain until the reader has seen everything
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...), err
}

const echoResult = `{"content":[{"type":"text","text":"hi"}], "structuredContent":{"echo":"hi","n":18446744073709551615},"x-extra":{"a":[]}}`

func echoUpstream() *fakeUpstream {
	fx := connected(echoTool)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(echoResult), nil
	}
	return fx
}

// A request read after a signal ended the session is never run: ServeStdio
// has waited for the requests it took and returned, so nothing may start
// after it (nor add to what it waited on). The client's pipe stays open, so
// the reader is still reading.
func TestServeStdioRunsNoRequestAfterItsEnd(t *testing.T) {
	fx := echoUpstream()
	reached := make(chan string, 4)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		reached <- method
		return json.RawMessage(echoResult), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	ctx, signal := context.WithCancel(context.Background())
	c := startStdioCtx(t, p, ctx)
	c.initialize()
	signal()
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("ServeStdio after the signal = %v", err)
		}
		c.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after the signal")
	}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
	select {
	case m := <-reached:
		t.Fatalf("a request read after ServeStdio returned reached the upstream (%s)", m)
	case <-time.After(time.Second):
	}
}

func TestServeStdio(t *testing.T) {
	fx := echoUpstream()
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)
	c.initialize()

	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	list := c.recv(`1`)
	result, _, _ := rawjson.Get([]byte(list), "result")
	tools, _, _ := rawjson.Get(result, "tools")
	if want := `[` + exposedEcho + `]`; string(tools) != want {
		t.Errorf("tools/list tools =\n%s\nwant\n%s", tools, want)
	}

	c.send(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hi", "n":18446744073709551615},"_meta":{"progressToken":7}}}`)
	if got, want := c.recv(`"call-1"`), `{"jsonrpc":"2.0","id":"call-1","result":`+echoResult+`}`; got != want {
		t.Errorf("tools/call response =\n%s\nwant\n%s", got, want)
	}
	reqs := fx.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	// The client's progress token 7 is replaced upstream by the proxy's own.
	if want := `{"name":"echo","arguments":{"text":"hi", "n":18446744073709551615},"_meta":{"progressToken":"px-progress-N"}}`; reqs[0].Method != "tools/call" || progressTokens.ReplaceAllString(reqs[0].Params, "px-progress-N") != want {
		t.Errorf("upstream request = %s %s\nwant tools/call %s", reqs[0].Method, reqs[0].Params, want)
	}

	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}`)
	if got, want := c.recv(`3`), `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool: nope"}}`; got != want {
		t.Errorf("unknown tool response = %s\nwant %s", got, want)
	}

	c.send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if got, want := c.recv(`4`), `{"jsonrpc":"2.0","id":4,"result":{}}`; got != want {
		t.Errorf("ping response = %s, want %s", got, want)
	}

	lines, err := c.finish()
	if err != nil {
		t.Errorf("ServeStdio = %v, want nil", err)
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) || !strings.Contains(l, `"jsonrpc":"2.0"`) {
			t.Errorf("stdout line is not JSON-RPC: %q", l)
		}
	}
}

func TestServeStdioModernCall(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	want := `{"jsonrpc":"2.0","id":1,"result":` + echoResult[:len(echoResult)-1] + `,"resultType":"complete"}}`
	if got := c.recv(`1`); got != want {
		t.Errorf("modern tools/call response =\n%s\nwant\n%s", got, want)
	}
}

// mcp-go refuses a 2026-07-28 request without client capabilities with
// -32602 before any handler runs; the client must see that reason, not
// "unknown tool" for a tool that exists.
func TestServeStdioModernCallWithoutCapabilities(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	got := c.recv(`1`)
	if strings.Contains(got, "unknown tool") {
		t.Errorf("response = %s\nthe tool exists: mcp-go's reason (missing client capabilities) was replaced", got)
	}
}

func TestServeStdioDrainsCallInFlightAtEOF(t *testing.T) {
	fx := connected(echoTool)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		select {
		case <-time.After(300 * time.Millisecond):
			return json.RawMessage(`{"content":[{"type":"text","text":"late"}]}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)
	c.initialize()
	start := time.Now() // before the call is sent, so before the upstream's 300 ms begin
	c.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
	lines, err := c.finish()
	if err != nil {
		t.Errorf("ServeStdio = %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("ServeStdio returned after %v, before the call could finish", d)
	}
	want := `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"late"}]}}`
	found := false
	for _, l := range lines {
		found = found || l == want
	}
	if !found {
		t.Errorf("the in-flight call's response was not written before ServeStdio returned; lines:\n%s", strings.Join(lines, "\n"))
	}
}

func TestServeStdioOverLongLine(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	c := startStdio(t, p)
	c.initialize()

	huge := make([]byte, 0, maxRequestBytes+64)
	huge = append(huge, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"`...)
	huge = append(huge, bytes.Repeat([]byte("a"), maxRequestBytes)...)
	huge = append(huge, `"}}}`...)
	c.send(string(huge))
	got := c.recv(`null`)
	if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request exceeds the 33554432-byte limit"}}`; got != want {
		t.Errorf("over-long line response = %s\nwant %s", got, want)
	}
	// The session goes on.
	c.send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	if got := c.recv(`6`); got != `{"jsonrpc":"2.0","id":6,"result":{}}` {
		t.Errorf("ping after the over-long line = %s", got)
	}
}

func TestServeStdioUnknownAgent(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": echoUpstream()})
	err := p.ServeStdio(context.Background(), "nobody", nil, strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("ServeStdio(agent nobody) = %v, want an error naming the agent", err)
	}
}

// count returns how many lines received so far contain substr.
func (c *stdioClient) count(substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, line := range c.seen {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}
