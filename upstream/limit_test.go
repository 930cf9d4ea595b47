package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func tooLargeLine(id string, limit int64) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32000,"message":"MCP response body exceeds the ` +
		strconv.FormatInt(limit, 10) + `-byte limit"}}` + "\n"
}

func TestResponseTooLargeError(t *testing.T) {
	err := error(&ResponseTooLargeError{Limit: 16078168})
	if got, want := err.Error(), "MCP response body exceeds the 16078168-byte limit"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), ErrResponseTooLarge) {
		t.Fatal("errors.Is(err, ErrResponseTooLarge) = false")
	}
}

func TestLineLimiter(t *testing.T) {
	big := strings.Repeat("x", 100)
	tests := []struct {
		name  string
		limit int64
		in    string
		want  string
		drops int
	}{
		{"short lines pass", 50, "{\"a\":1}\n\n{\"b\":2}\r\n", "{\"a\":1}\n\n{\"b\":2}\r\n", 0},
		{"exactly the limit passes", 10, "0123456789\n", "0123456789\n", 0},
		{"last line without newline", 50, "{\"a\":1}\n{\"b\"", "{\"a\":1}\n{\"b\"", 0},
		{"numeric id replaced", 50,
			`{"jsonrpc":"2.0","id":42,"result":{"text":"` + big + `"}}` + "\n" + `{"ok":1}` + "\n",
			tooLargeLine("42", 50) + `{"ok":1}` + "\n", 0},
		{"string id replaced", 50,
			`{"jsonrpc":"2.0","id":"px-7","result":"` + big + `"}` + "\n",
			tooLargeLine(`"px-7"`, 50), 0},
		{"error response replaced", 50,
			` { "id" : -3.5e2 , "error" : {"message":"` + big + `"}}` + "\n",
			tooLargeLine("-3.5e2", 50), 0},
		{"id after a small result", 50,
			`{"result":{"a":[1,{"b":"}"}]},"id":9,"more":"` + big + `"}` + "\n",
			tooLargeLine("9", 50), 0},
		{"escaped string id kept as written", 50,
			`{"jsonrpc":"2.0","id":"a\"b\\u00e9","result":"` + big + `"}` + "\n",
			tooLargeLine(`"a\"b\\u00e9"`, 50), 0},
		{"limit below the id scan window", 10,
			`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + "short\n",
			tooLargeLine("1", 10) + "short\n", 0},
		{"one over the limit at EOF", 10, `{"id":5,"result":"abc"}`, tooLargeLine("5", 10), 0},
		{"request from the server dropped", 50,
			`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":"` + big + `"}` + "\n" + "next\n",
			"next\n", 1},
		{"notification dropped", 50, `{"jsonrpc":"2.0","method":"notifications/message","params":"` + big + `"}` + "\n", "", 1},
		{"id without result or error dropped", 50, `{"jsonrpc":"2.0","id":1,"x":"` + big + `"}` + "\n", "", 1},
		{"null id dropped", 50, `{"jsonrpc":"2.0","id":null,"error":"` + big + `"}` + "\n", "", 1},
		{"id after the scan window dropped", 50, `{"result":"` + strings.Repeat("y", 2*idScanBytes) + `","id":1}` + "\n", "", 1},
		{"id after a result within the window", 50, `{"result":"` + big + `","id":1}` + "\n", tooLargeLine("1", 50), 0},
		{"batch dropped", 50, `[{"id":1,"result":"` + big + `"}]` + "\n", "", 1},
		{"two ids dropped", 50, `{"id":1,"id":2,"result":"` + big + `"}` + "\n", "", 1},
		{"not JSON dropped", 50, big + "\n" + "ok\n", "ok\n", 1},
		{"id cut by the window end dropped", 50, `{"jsonrpc":"2.0","result":"` + strings.Repeat("y", idScanBytes) + `","id":77}` + "\n", "", 1},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	}
	for _, tt := range tests {
		for rname, wrap := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				var drops []error
				lr := newLineReader(wrap(strings.NewReader(tt.in)), tt.limit, withDropHook(func(err error) { drops = append(drops, err) }))
				got, err := readAll(lr)
				if err != nil {
					t.Fatalf("readAll: %v", err)
				}
				if string(got) != tt.want {
					t.Errorf("output\n got %q\nwant %q", got, tt.want)
				}
				if len(drops) != tt.drops {
					t.Errorf("drops = %d (%v), want %d", len(drops), drops, tt.drops)
				}
				for _, d := range drops {
					if !errors.Is(d, ErrResponseTooLarge) {
						t.Errorf("drop error %v does not match ErrResponseTooLarge", d)
					}
				}
				// ReadLine yields one line per call.
				lines := readLines(t, newLineReader(wrap(strings.NewReader(tt.in)), tt.limit))
				if got := strings.Join(lines, ""); got != tt.want {
					t.Errorf("ReadLine output\n got %q\nwant %q", got, tt.want)
				}
			})
		}
	}
}

func TestLineLimiterReplacementIsValidJSONRPC(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":"req-1","result":"` + strings.Repeat("z", 1000) + `"}` + "\n"
	got, err := readAll(newLineReader(strings.NewReader(in), 100))
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(got, &msg); err != nil {
		t.Fatalf("replacement %q is not JSON: %v", got, err)
	}
	if msg.JSONRPC != "2.0" || msg.ID != "req-1" || msg.Error.Code != -32000 ||
		msg.Error.Message != "MCP response body exceeds the 100-byte limit" {
		t.Fatalf("replacement = %+v", msg)
	}
}

func TestLineLimiterReadError(t *testing.T) {
	boom := errors.New("pipe broke")
	r := io.MultiReader(strings.NewReader("whole\npart"), iotest.ErrReader(boom))
	got, err := readAll(newLineReader(r, 100))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if string(got) != "whole\npart" {
		t.Fatalf("got %q, want the bytes before the error", got)
	}
}

func TestLineLimiterDisabled(t *testing.T) {
	in := strings.Repeat("x", 3*lineChunk) + "\n" + "y"
	got, err := readAll(newLineReader(strings.NewReader(in), 0))
	if err != nil || string(got) != in {
		t.Fatalf("a limit of 0 should pass every line as it is: got %d bytes, %v", len(got), err)
	}
}

// patternReader yields n bytes of a repeated byte without holding them.
type patternReader struct {
	head, tail []byte
	n          int64
	c          byte
}

func (p *patternReader) Read(b []byte) (int, error) {
	switch {
	case len(p.head) > 0:
		k := copy(b, p.head)
		p.head = p.head[k:]
		return k, nil
	case p.n > 0:
		k := int(min(int64(len(b)), p.n))
		for i := range k {
			b[i] = p.c
		}
		p.n -= int64(k)
		return k, nil
	case len(p.tail) > 0:
		k := copy(b, p.tail)
		p.tail = p.tail[k:]
		return k, nil
	}
	return 0, io.EOF
}

func TestLineLimiterMemory(t *testing.T) {
	const size = 64 << 20
	src := &patternReader{
		head: []byte(`{"jsonrpc":"2.0","id":5,"result":{"text":"`),
		n:    size,
		c:    'a',
		tail: []byte(`"}}` + "\n" + `{"jsonrpc":"2.0","id":6,"result":{}}` + "\n"),
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := readAll(newLineReader(src, 1<<20))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	want := tooLargeLine("5", 1<<20) + `{"jsonrpc":"2.0","id":6,"result":{}}` + "\n"
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// One 1 MiB line buffer, one read chunk and small change; a limiter
	// that held the line would allocate over 64 MiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("allocated %d bytes for a %d-byte line", alloc, size)
	}
}

func TestLimitBody(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		limit   int64
		want    string
		tooLong bool
	}{
		{"under", "abc", 5, "abc", false},
		{"exactly", "abcde", 5, "abcde", false},
		{"one over", "abcdef", 5, "abcde", true},
		{"far over", strings.Repeat("a", 10000), 100, strings.Repeat("a", 100), true},
		{"empty", "", 5, "", false},
	}
	for _, tt := range tests {
		for rname, wrap := range map[string]func(io.Reader) io.Reader{"whole": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader} {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				body := limitBody(io.NopCloser(wrap(strings.NewReader(tt.body))), tt.limit)
				got, err := io.ReadAll(body)
				if string(got) != tt.want {
					t.Errorf("got %d bytes, want %d", len(got), len(tt.want))
				}
				var tl *ResponseTooLargeError
				if tt.tooLong != errors.As(err, &tl) {
					t.Fatalf("err = %v, want too-large: %v", err, tt.tooLong)
				}
				if tt.tooLong {
					if tl.Limit != tt.limit {
						t.Errorf("Limit = %d, want %d", tl.Limit, tt.limit)
					}
					if _, err2 := body.Read(make([]byte, 10)); !errors.Is(err2, ErrResponseTooLarge) {
						t.Errorf("a later Read returned %v", err2)
					}
				} else if err != nil {
					t.Errorf("err = %v", err)
				}
			})
		}
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestLimitSSE(t *testing.T) {
	ev := func(data string) string { return "event: message\ndata: " + data + "\n\n" }
	tests := []struct {
		name    string
		stream  string
		limit   int64
		wantLen int // bytes delivered; -1 means the whole stream
		tooLong bool
	}{
		{"events under the limit", ev("a") + ev("b") + ev("c"), int64(len(ev("a"))) - 1, -1, false},
		{"total over, each under", strings.Repeat(ev("0123456789"), 50), 40, -1, false},
		{"one event over", ev("small") + ev(strings.Repeat("x", 100)) + ev("after"), 50, len(ev("small")) + 50, true},
		{"exactly the limit", "data: 12345678\n", 15, -1, false},
		{"one byte over", "data: 123456789\n", 15, 15, true},
		{"CRLF ends", "data: a\r\n\r\ndata: b\r\n\r\n", 9, -1, false},
		{"CR ends", "data: a\r\rdata: b\r\r", 8, -1, false},
		{"CRLF counted", "data: abc\r\n\r\n", 10, 10, true},
		{"comment lines count", ": keepalive\n: keepalive\n", 20, 20, true},
		{"line without end", "data: " + strings.Repeat("y", 100), 30, 30, true},
		{"leading blank lines", "\n\n\r\n" + ev("z"), int64(len(ev("z"))) - 1, -1, false},
	}
	for _, tt := range tests {
		for rname, wrap := range map[string]func(io.Reader) io.Reader{"whole": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader, "half": iotest.HalfReader} {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				rec := &closeRecorder{Reader: wrap(strings.NewReader(tt.stream))}
				body := limitSSE(rec, tt.limit)
				got, err := io.ReadAll(body)
				want := tt.wantLen
				if want < 0 {
					want = len(tt.stream)
				}
				if string(got) != tt.stream[:want] {
					t.Errorf("got %q, want %q", got, tt.stream[:want])
				}
				if tt.tooLong != errors.Is(err, ErrResponseTooLarge) || (!tt.tooLong && err != nil) {
					t.Fatalf("err = %v, want too-large: %v", err, tt.tooLong)
				}
				if err := body.Close(); err != nil || !rec.closed {
					t.Fatalf("Close = %v, closed = %v", err, rec.closed)
				}
			})
		}
	}
}

func TestLimitTransport(t *testing.T) {
	const limit = 100
	var bodyServed string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big-length":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "101")
			bodyServed = strings.Repeat("a", 101)
			_, _ = io.WriteString(w, bodyServed)
		case "/big-chunked":
			w.Header().Set("Content-Type", "application/json")
			for range 20 {
				_, _ = io.WriteString(w, strings.Repeat("b", 10))
				w.(http.Flusher).Flush()
			}
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		case "/sse":
			w.Header().Set("Content-Type", "Text/Event-Stream; charset=utf-8")
			for range 20 {
				_, _ = io.WriteString(w, "data: {\"n\":1}\n\n")
				w.(http.Flusher).Flush()
			}
		case "/sse-big":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+strings.Repeat("c", 200)+"\n\n")
		}
	}))
	defer srv.Close()
	client := &http.Client{Transport: limitResponses(http.DefaultTransport, limit)}

	get := func(path string) (string, error) {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	tests := []struct {
		path    string
		wantLen int
		tooLong bool
	}{
		{"/ok", len(`{"ok":true}`), false},
		{"/big-length", 0, true},
		{"/big-chunked", limit, true},
		{"/sse", 20 * len("data: {\"n\":1}\n\n"), false},
		{"/sse-big", limit, true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := get(tt.path)
			if len(got) != tt.wantLen {
				t.Errorf("got %d bytes, want %d", len(got), tt.wantLen)
			}
			if tt.tooLong {
				if !errors.Is(err, ErrResponseTooLarge) || !strings.Contains(err.Error(), "MCP response body exceeds the 100-byte limit") {
					t.Fatalf("err = %v, want the 100-byte limit error", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzLineLimiter feeds random lines in random read sizes and checks every
// output line against its input line: the same bytes when within the limit,
// else a well-formed replacement whose id came from the line's first bytes,
// or nothing (counted by the drop hook).
func FuzzLineLimiter(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"x":"aaaaaaaaaaaaaaaaaaaaaaaaa"}}`+"\nok\n"), uint16(20), uint8(3))
	f.Add([]byte(`{"id":"s","error":{}}`+"\n\n\n"+`{"method":"m","id":2,"params":[1,2,3,4,5,6,7,8]}`), uint16(10), uint8(1))
	f.Add([]byte("no newline at all but long enough"), uint16(5), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, limit16 uint16, step uint8) {
		limit := int64(limit16%512) + 1
		drops := 0
		l := newLineReader(&stepReader{b: data, step: int(step%64) + 1}, limit,
			withDropHook(func(error) { drops++ }))
		var out bytes.Buffer
		type keptLine struct{ line, copy []byte }
		var kept []keptLine
		for {
			line, err := l.ReadLine()
			if i := bytes.IndexByte(line, '\n'); i >= 0 && i != len(line)-1 {
				t.Fatalf("ReadLine returned %q, not one line", line)
			}
			if l.Owned() {
				kept = append(kept, keptLine{line, bytes.Clone(line)})
			}
			out.Write(line)
			if bound := 2*max(int(limit)+1, idScanBytes) + 64; cap(l.line) > bound {
				t.Fatalf("line buffer grew to %d for limit %d", cap(l.line), limit)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}

		for _, k := range kept {
			if !bytes.Equal(k.line, k.copy) {
				t.Fatalf("a line handed over as owned changed from %q to %q", k.copy, k.line)
			}
		}

		inLines := bytes.SplitAfter(data, []byte("\n"))
		if len(inLines[len(inLines)-1]) == 0 {
			inLines = inLines[:len(inLines)-1]
		}
		outLines := bytes.SplitAfter(out.Bytes(), []byte("\n"))
		if len(outLines[len(outLines)-1]) == 0 {
			outLines = outLines[:len(outLines)-1]
		}
		k, dropped := 0, 0
		for _, in := range inLines {
			body := bytes.TrimSuffix(in, []byte("\n"))
			if int64(len(body)) <= limit {
				if k >= len(outLines) || !bytes.Equal(outLines[k], in) {
					t.Fatalf("line %q within the limit not passed through; output %q", in, out.Bytes())
				}
				k++
				continue
			}
			if k < len(outLines) && isReplacementFor(outLines[k], body, limit) {
				k++
				continue
			}
			dropped++
		}
		if k != len(outLines) {
			t.Fatalf("unexpected output lines %q", outLines[k:])
		}
		if dropped != drops {
			t.Fatalf("%d lines dropped, hook told of %d", dropped, drops)
		}
	})
}

// isReplacementFor reports whether out is the too-large response for the
// over-long line body.
func isReplacementFor(out, body []byte, limit int64) bool {
	prefix := []byte(`{"jsonrpc":"2.0","id":`)
	suffix := []byte(`,"error":{"code":-32000,"message":"MCP response body exceeds the ` + strconv.FormatInt(limit, 10) + `-byte limit"}}` + "\n")
	if !bytes.HasPrefix(out, prefix) || !bytes.HasSuffix(out, suffix) || len(out) < len(prefix)+len(suffix) {
		return false
	}
	id := out[len(prefix) : len(out)-len(suffix)]
	head := body[:min(len(body), idScanBytes)]
	return json.Valid(out) && json.Valid(id) && bytes.Contains(head, id)
}

// stepReader returns at most step bytes per Read.
type stepReader struct {
	b    []byte
	step int
}

func (s *stepReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.step)], s.b)
	s.b = s.b[n:]
	return n, nil
}

// FuzzLimitSSE checks limitSSE against a line-based model of the events.
func FuzzLimitSSE(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: bb\r\n\r\n: c\rdata: d\r\r"), uint16(8), uint8(2))
	f.Add([]byte("data: "+strings.Repeat("x", 40)+"\n\n"), uint16(20), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, limit16 uint16, step uint8) {
		limit := int64(limit16%256) + 1
		got, err := io.ReadAll(limitSSE(io.NopCloser(&stepReader{b: data, step: int(step%32) + 1}), limit))
		want := sseModelCut(data, limit)
		if want < 0 {
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("stream within the limit: got %q, %v", got, err)
			}
			return
		}
		if !errors.Is(err, ErrResponseTooLarge) || !bytes.Equal(got, data[:want]) {
			t.Fatalf("want %q and the too-large error; got %q, %v", data[:want], got, err)
		}
	})
}

// sseModelCut splits data into lines (ending in "\r\n", "\r" or "\n"),
// treats an empty line as the end of an event, and returns the offset of
// the first byte that takes an event past limit, or -1.
func sseModelCut(data []byte, limit int64) int {
	var n int64
	for off := 0; off < len(data); {
		end := off
		for end < len(data) && data[end] != '\r' && data[end] != '\n' {
			end++
		}
		term := 0
		if end < len(data) {
			term = 1
			if data[end] == '\r' && end+1 < len(data) && data[end+1] == '\n' {
				term = 2
			}
		}
		if end == off && term > 0 {
			n = 0 // blank line: dispatch
			off += term
			continue
		}
		for i := off; i < end+term; i++ {
			n++
			if n > limit {
				return i
			}
		}
		off = end + term
	}
	return -1
}

// readLines reads l to its end with ReadLine, checking that each call
// yields one line.
// readAll is io.ReadAll for a line reader: every line ReadLine returns, up
// to its error (nil at io.EOF).
func readAll(l *lineLimiter) ([]byte, error) {
	var out []byte
	for {
		line, err := l.ReadLine()
		out = append(out, line...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func readLines(t *testing.T, l *lineLimiter) []string {
	t.Helper()
	var lines []string
	for {
		line, err := l.ReadLine()
		if err == io.EOF {
			return lines
		}
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.IndexByte(line, '\n'); len(line) == 0 || (i >= 0 && i != len(line)-1) {
			t.Fatalf("ReadLine returned %q, not one line", line)
		}
		lines = append(lines, string(line))
	}
}

// A line that spans chunks starts at the size of the last such line, but
// its buffer stays within the bound FuzzLineLimiter checks, whatever came
// before.
func TestLineLimiterLongLineCapacity(t *testing.T) {
	const limit = 100_000
	long := strings.Repeat("a", 90_000) + "\n"
	in := long + `{"id":1,"result":"` + strings.Repeat("b", 300_000) + "\"}\n" + long + strings.Repeat("c", 40_000) + "\n"
	l := newLineReader(iotest.HalfReader(strings.NewReader(in)), limit)
	want := []string{long, string(tooLargeResponse([]byte("1"), limit)), long, strings.Repeat("c", 40_000) + "\n"}
	for i, w := range want {
		line, err := l.ReadLine()
		if err != nil || string(line) != w {
			t.Fatalf("line %d: %d bytes (%v), want %d", i, len(line), err, len(w))
		}
		if cap(l.line) > 2*(limit+1) { // append growth, as FuzzLineLimiter bounds it
			t.Fatalf("line %d: line buffer capacity %d over the limit", i, cap(l.line))
		}
	}
	if _, err := l.ReadLine(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestLineLimiterLetsLongLinesGo: a line longer than a read chunk leaves
// no buffer behind once the next line is read, and the next long line
// starts at its predecessor's size instead of growing to it again.
func TestLineLimiterLetsLongLinesGo(t *testing.T) {
	long := `{"id":1,"result":"` + strings.Repeat("a", 60_000) + "\"}\n"
	short := `{"id":2,"result":{}}` + "\n"
	l := newLineReader(iotest.HalfReader(strings.NewReader(long+short+long)), 1<<20)
	for i, want := range []string{long, short, long} {
		line, err := l.ReadLine()
		if err != nil || string(line) != want {
			t.Fatalf("line %d: %d bytes (%v), want %d", i, len(line), err, len(want))
		}
		if i == 1 && cap(l.line) > shrinkAbove {
			t.Fatalf("after a short line the limiter holds a %d-byte line buffer", cap(l.line))
		}
		if i == 2 && cap(line) != len(long) {
			t.Fatalf("the second long line was built in %d bytes of capacity, want %d", cap(line), len(long))
		}
	}
}

// piecesReader returns its pieces one per Read.
type piecesReader struct{ pieces []string }

func (r *piecesReader) Read(p []byte) (int, error) {
	if len(r.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.pieces[0])
	if r.pieces[0] = r.pieces[0][n:]; r.pieces[0] == "" {
		r.pieces = r.pieces[1:]
	}
	return n, nil
}

// TestLineLimiterShortLinesAfterLong: after a long line, short lines that
// each arrive in two reads are not built in buffers of the long line's
// size (65 MB allocated for 1,000 of them after one of 60 KB, before the
// size hint was kept to long lines).
func TestLineLimiterShortLinesAfterLong(t *testing.T) {
	pieces := []string{`{"id":1,"result":"` + strings.Repeat("a", 60_000) + "\"}\n"}
	short := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}` + "\n"
	for range 1000 {
		pieces = append(pieces, short[:40], short[40:])
	}
	l := newLineReader(&piecesReader{pieces: pieces}, 1<<20)
	if _, err := l.ReadLine(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 1000 {
		line, err := l.ReadLine()
		if err != nil || string(line) != short {
			t.Fatalf("line %d: %q, %v", i, line, err)
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1000*1024 {
		t.Fatalf("1,000 short lines allocated %d bytes", alloc)
	}
}

// A line longer than a read chunk, in a buffer about its size, is handed
// over: Owned reports it, and the limiter never writes to it again,
// whatever it reads next. Lines read within a chunk are not owned.
func TestLineLimiterOwnedLines(t *testing.T) {
	long := func(c byte, n int) string { return `{"id":1,"result":"` + strings.Repeat(string(c), n) + `"}` + "\n" }
	// b is as long as a, so its buffer is made at its size (lastLong).
	input := long('a', 3*lineChunk) + "short\n" + long('b', 3*lineChunk) + long('c', lineChunk+10) + "x\ny\n" + long('d', 2*lineChunk)
	l := newLineReader(&stepReader{b: []byte(input), step: 1000}, 1<<30)
	type got struct {
		line  []byte
		copy  string
		owned bool
	}
	var lines []got
	for {
		line, err := l.ReadLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, got{line, string(line), l.Owned()})
	}
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7", len(lines))
	}
	for i, want := range map[int]bool{1: false, 2: true, 4: false, 5: false} {
		if lines[i].owned != want {
			t.Errorf("line %d (%d bytes): owned %v, want %v", i, len(lines[i].copy), lines[i].owned, want)
		}
	}
	for i, g := range lines {
		if g.owned && (string(g.line) != g.copy || cap(g.line) > len(g.line)+len(g.line)/4) {
			t.Errorf("owned line %d changed after later reads, or its buffer (%d) is much larger than it (%d)", i, cap(g.line), len(g.line))
		}
	}
}

// A long line read into a buffer sized for a much longer one before it
// (lastLong) is not handed over: whoever keeps it would keep the whole
// buffer. A line handed over is about its buffer's size.
func TestLineLimiterOwnsNoOversizedBuffer(t *testing.T) {
	long := func(n int) string { return `{"id":1,"result":"` + strings.Repeat("r", n) + `"}` + "\n" }
	l := newLineReader(&stepReader{b: []byte(long(4<<20) + long(70<<10) + long(70<<10)), step: 1000}, 1<<30)
	for i := range 3 {
		line, err := l.ReadLine()
		if err != nil {
			t.Fatal(err)
		}
		if l.Owned() && cap(line) > len(line)+len(line)/4 {
			t.Fatalf("line %d of %d bytes handed over in a buffer of %d", i, len(line), cap(line))
		}
	}
}

// TestLineLimiterLongLines: lines of every length around the read chunk,
// read in steps that do and do not divide them, come out byte for byte; a
// line handed over is in a buffer about its size; one over the limit
// becomes the replacement response; and the last line at EOF without a
// newline is delivered as it is.
func TestLineLimiterLongLines(t *testing.T) {
	line := func(n int) string { // a response line of n bytes, its '\n' included
		head := `{"jsonrpc":"2.0","id":7,"result":"`
		return head + strings.Repeat("p", n-len(head)-3) + `"}` + "\n"
	}
	const limit = 5 * lineChunk
	for _, n := range []int{40, lineChunk - 1, lineChunk, lineChunk + 1, 2*lineChunk + 3, 4*lineChunk + 1} {
		for _, step := range []int{1000, lineChunk, 3 * lineChunk} {
			input := line(n) + "short\n" + line(limit+100) + line(n)
			input += strings.TrimSuffix(line(n), "\n") // at EOF without a newline
			l := newLineReader(&stepReader{b: []byte(input), step: step}, limit)
			var got []string
			for {
				b, err := l.ReadLine()
				if len(b) > 0 {
					if l.Owned() && len(b) > lineChunk && cap(b) > len(b)+len(b)/4 {
						t.Errorf("n %d step %d: line %d handed over in a buffer of %d for %d bytes", n, step, len(got), cap(b), len(b))
					}
					got = append(got, string(b))
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			want := []string{line(n), "short\n", string(tooLargeResponse([]byte("7"), limit)), line(n), strings.TrimSuffix(line(n), "\n")}
			if len(got) != len(want) {
				t.Fatalf("n %d step %d: %d lines, want %d", n, step, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("n %d step %d: line %d is %d bytes %.60q, want %d bytes %.60q", n, step, i, len(got[i]), got[i], len(want[i]), want[i])
				}
			}
		}
	}
}
