package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A tiny JSON-RPC client of our own, for byte-level comparisons: it keeps
// every message exactly as it came off the wire.

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// rpcMsg is one message as received; Params and Result keep their exact
// bytes.
type rpcMsg struct {
	Raw    []byte
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

func parseMsg(line []byte) (*rpcMsg, error) {
	m := &rpcMsg{}
	if err := json.Unmarshal(line, m); err != nil {
		return nil, err
	}
	m.Raw = append([]byte(nil), line...)
	return m, nil
}

// isResponseTo reports whether m answers the request with numeric id.
func (m *rpcMsg) isResponseTo(id int) bool {
	return m.Method == "" && string(m.ID) == strconv.Itoa(id) && (m.Result != nil || m.Error != nil)
}

// rawClient is a JSON-RPC client over one transport.
type rawClient interface {
	// request sends method with params (raw JSON, "" for none) and returns the response.
	request(t testing.TB, method, params string) *rpcMsg
	// notify sends a notification.
	notify(t testing.TB, method, params string)
}

// rawInit runs the initialize handshake with protocol 2025-11-25 and no
// client capabilities.
func rawInit(t testing.TB, c rawClient) *rpcMsg {
	t.Helper()
	r := c.request(t, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-proxy-integration-raw","version":"1.0.0"}}`)
	if r.Error != nil {
		t.Fatalf("initialize: %d %s", r.Error.Code, r.Error.Message)
	}
	c.notify(t, "notifications/initialized", "")
	return r
}

// rawResult sends a request that must succeed and returns its result bytes.
func rawResult(t testing.TB, c rawClient, method, params string) json.RawMessage {
	t.Helper()
	r := c.request(t, method, params)
	if r.Error != nil {
		t.Fatalf("%s %s: error %d %s", method, params, r.Error.Code, r.Error.Message)
	}
	return r.Result
}

func envelope(id int, method, params string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0",`)
	if id > 0 {
		fmt.Fprintf(&b, `"id":%d,`, id)
	}
	fmt.Fprintf(&b, `"method":%q`, method)
	if params != "" {
		b.WriteString(`,"params":`)
		b.WriteString(params)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// ---- stdio ----

// stdioRaw talks newline-delimited JSON-RPC to a child process.
type stdioRaw struct {
	p     *proc
	in    io.WriteCloser
	lines chan []byte // every stdout line, in order

	mu     sync.Mutex // one request at a time
	nextID int
	others []*rpcMsg // messages that were not the awaited response
	all    [][]byte  // every stdout line seen by request
}

// startStdioRaw starts cmd and returns a raw client on its stdin/stdout.
func startStdioRaw(t testing.TB, name string, cmd *exec.Cmd) *stdioRaw {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// An os.Pipe rather than StdoutPipe: Wait does not close it, so every
	// line written before the process ended is read.
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	c := &stdioRaw{in: in, lines: make(chan []byte, 4096)}
	quit, readerDone := make(chan struct{}), make(chan struct{})
	// Registered before startProc, so it runs after the process is stopped.
	t.Cleanup(func() {
		close(quit)
		select {
		case <-readerDone:
		case <-time.After(exitTimeout):
			t.Errorf("%s: its stdout did not end within %s of its exit", name, exitTimeout)
		}
	})
	c.p = startProc(t, name, cmd, nil)
	_ = outW.Close() // the child holds its own copy
	c.p.cleanExit = cmd.Path == proxyBin
	go func() {
		defer close(readerDone)
		defer out.Close()
		defer close(c.lines)
		br := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case c.lines <- bytes.TrimRight(line, "\n"):
				case <-quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	// Runs first: a stdio server ends at stdin EOF.
	t.Cleanup(func() { _ = in.Close() })
	return c
}

func (c *stdioRaw) write(t testing.TB, msg []byte) {
	t.Helper()
	if _, err := c.in.Write(append(msg, '\n')); err != nil {
		t.Fatalf("%s: write: %v", c.p.name, err)
	}
}

func (c *stdioRaw) notify(t testing.TB, method, params string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.write(t, envelope(0, method, params))
}

func (c *stdioRaw) request(t testing.TB, method, params string) *rpcMsg {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := c.nextID
	c.write(t, envelope(id, method, params))
	return c.await(t, fmt.Sprintf("the answer to %s (id %d)", method, id), func(m *rpcMsg) bool { return m.isResponseTo(id) })
}

// await returns the next stdout message that match accepts, within
// callTimeout; the messages before it go to c.others. what names the
// awaited message in a failure.
func (c *stdioRaw) await(t testing.TB, what string, match func(*rpcMsg) bool) *rpcMsg {
	t.Helper()
	timer := time.NewTimer(callTimeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("%s: stdout closed while waiting for %s\nstderr:\n%s", c.p.name, what, tail(c.p.stderr.String(), 4000))
			}
			c.all = append(c.all, line)
			m, err := parseMsg(line)
			if err != nil {
				t.Fatalf("%s: stdout line is not JSON (%v): %q", c.p.name, err, tail(string(line), 300))
			}
			if match(m) {
				return m
			}
			c.others = append(c.others, m)
		case <-timer.C:
			t.Fatalf("%s: no %s within %s", c.p.name, what, callTimeout)
		}
	}
}

// exchange writes raw request lines at once and returns the next
// len(lines) responses in arrival order (whatever their ids), for tests of
// the ids themselves.
func (c *stdioRaw) exchange(t testing.TB, lines ...string) []*rpcMsg {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range lines {
		c.write(t, []byte(line))
	}
	timer := time.NewTimer(callTimeout)
	defer timer.Stop()
	var out []*rpcMsg
	for len(out) < len(lines) {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("%s: stdout closed while waiting for the answers to %q", c.p.name, lines)
			}
			c.all = append(c.all, l)
			m, err := parseMsg(l)
			if err != nil {
				t.Fatalf("%s: stdout line is not JSON (%v): %q", c.p.name, err, tail(string(l), 300))
			}
			if m.Method == "" && (m.Result != nil || m.Error != nil) {
				out = append(out, m)
			} else {
				c.others = append(c.others, m)
			}
		case <-timer.C:
			t.Fatalf("%s: %d answers to %q within %s, want %d", c.p.name, len(out), lines, callTimeout, len(lines))
		}
	}
	return out
}

// closeAndDrain closes stdin and returns every stdout line left until EOF.
func (c *stdioRaw) closeAndDrain(t testing.TB) [][]byte {
	t.Helper()
	_ = c.in.Close()
	var rest [][]byte
	timer := time.NewTimer(exitTimeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return rest
			}
			rest = append(rest, line)
		case <-timer.C:
			t.Fatalf("%s: stdout did not end within %s of closing stdin", c.p.name, exitTimeout)
		}
	}
}

// directStdio starts an upstream directly (no proxy) and initializes it.
func directStdio(t testing.TB, name, command string, args ...string) *stdioRaw {
	t.Helper()
	c := startStdioRaw(t, name, exec.Command(command, args...))
	rawInit(t, c)
	return c
}

// ---- Streamable HTTP ----

// httpRaw talks Streamable HTTP: one POST per message, with the session id.
type httpRaw struct {
	url    string
	client *http.Client

	mu      sync.Mutex
	nextID  int
	session string
	proto   string
	others  []*rpcMsg
	// header holds extra headers sent on every POST (trace context).
	header http.Header
}

func newHTTPRaw(url string) *httpRaw {
	return &httpRaw{url: url, client: &http.Client{Timeout: callTimeout}}
}

func (c *httpRaw) post(t testing.TB, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.proto != "" {
		req.Header.Set("MCP-Protocol-Version", c.proto)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", c.url, err)
	}
	return resp
}

func (c *httpRaw) notify(t testing.TB, method, params string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := c.post(t, envelope(0, method, params))
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Fatalf("notification %s: HTTP %d", method, resp.StatusCode)
	}
}

func (c *httpRaw) request(t testing.TB, method, params string) *rpcMsg {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := c.nextID
	resp := c.post(t, envelope(id, method, params))
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		t.Fatalf("%s: read body: %v", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, tail(string(body), 500))
	}
	if method == "initialize" {
		c.session = resp.Header.Get("Mcp-Session-Id")
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msgs = sseData(body)
	} else {
		msgs = [][]byte{bytes.TrimSpace(body)}
	}
	var found *rpcMsg
	for _, data := range msgs {
		m, err := parseMsg(data)
		if err != nil {
			t.Fatalf("%s: message is not JSON (%v): %q", method, err, tail(string(data), 300))
		}
		if found == nil && m.isResponseTo(id) {
			found = m
			continue
		}
		c.others = append(c.others, m)
	}
	if found == nil {
		t.Fatalf("%s: no response with id %d in %q", method, id, tail(string(body), 500))
	}
	if method == "initialize" && found.Result != nil {
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(found.Result, &r)
		c.proto = r.ProtocolVersion
	}
	return found
}

// sseData returns the data of every event in an event-stream body (multi-line
// data joined with newlines, as the SSE format says).
func sseData(body []byte) [][]byte {
	var out [][]byte
	for _, event := range bytes.Split(bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		var data [][]byte
		for _, line := range bytes.Split(event, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(v, []byte(" ")))
			}
		}
		// An event with empty data (a resumability priming event) carries no message.
		if joined := bytes.Join(data, []byte("\n")); len(bytes.TrimSpace(joined)) > 0 {
			out = append(out, joined)
		}
	}
	return out
}

// directHTTP initializes a raw client on an upstream's URL.
func directHTTP(t testing.TB, url string) *httpRaw {
	t.Helper()
	c := newHTTPRaw(url)
	rawInit(t, c)
	return c
}

// ---- result helpers ----

// toolsOf returns the raw tool objects of a tools/list result, by name.
func toolsOf(t testing.TB, result json.RawMessage) (names []string, byName map[string]json.RawMessage) {
	t.Helper()
	var r struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("tools/list result: %v", err)
	}
	byName = map[string]json.RawMessage{}
	for _, raw := range r.Tools {
		var n struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatalf("tool object: %v", err)
		}
		names = append(names, n.Name)
		byName[n.Name] = raw
	}
	return names, byName
}

// callParams is the params of a tools/call.
func callParams(name, args string) string {
	if args == "" {
		args = "{}"
	}
	return fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args)
}
