package upstream

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Every wrapper in this file enforces max_response_bytes (docs/configuration.md#servers) on one
// transport: stdio per line, plain JSON per body, SSE per event. A limit <= 0
// disables the check (callers pass the resolved config value, which is
// always positive). None of them is safe for concurrent use, as for any
// io.Reader.

const (
	// lineChunk is how much of a child's stdout the line limiter reads at
	// once; lines within one chunk pass through without a copy, and a
	// longer one gets a buffer of its own, handed on with it. Every stdio
	// server keeps its chunk for good: at 8 KiB rather than 32 the 20
	// servers of the load test's fleet hold 480 KB less, and a 64 KiB
	// result over stdio costs the same CPU (BenchmarkStdioCall64KSDKUpstream)
	// and allocates 160 KB instead of 184.
	lineChunk = 8 << 10
	// idScanBytes is how much of an over-long line is kept to find the
	// response id: ids come first in practice ({"jsonrpc":"2.0","id":…).
	idScanBytes = 4 << 10
	// shrinkAbove: after a line longer than this, the line buffer is let go,
	// so that between messages a connection holds its read chunk and at
	// most this much more. Twenty servers each keeping a 60 KB tools/list
	// line would otherwise hold over a megabyte for good; the next long
	// line is allocated at its predecessor's size (lastLong) instead.
	shrinkAbove = lineChunk
	// tooLargeCode is the JSON-RPC error code of the replacement response
	// (implementation-defined server error range).
	tooLargeCode = -32000
)

// lineOption configures newLineReader.
type lineOption func(*lineLimiter)

// withDropHook sets fn to be told, synchronously from ReadLine, of every
// over-long line that was dropped because no response id could be read from
// its first bytes. nil means drops go unreported.
func withDropHook(fn func(error)) lineOption {
	return func(l *lineLimiter) { l.onDrop = fn }
}

// newLineReader bounds the lines of r, a stdio child's stdout carrying
// newline-delimited JSON-RPC. A line of at most limit bytes (its '\n' not
// counted) passes through byte for byte. A longer line is never held whole:
// its first idScanBytes are kept to look for the id of a JSON-RPC response,
// the rest is discarded up to the newline, and in its place comes
//
//	{"jsonrpc":"2.0","id":<id>,"error":{"code":-32000,"message":"MCP response body exceeds the <N>-byte limit"}}
//
// so that exactly that request fails and the connection survives. When no
// response id is found (a request or notification, an id after a huge
// field, a batch), the line is dropped and the drop hook is told. Memory is
// one read chunk plus at most max(limit, idScanBytes) for a line in
// progress. A last line without '\n' at EOF is delivered as it is. Lines
// are read with ReadLine. A limit <= 0 leaves lines unbounded.
func newLineReader(r io.Reader, limit int64, opts ...lineOption) *lineLimiter {
	if limit <= 0 {
		limit = math.MaxInt64
	}
	l := &lineLimiter{r: r, limit: limit}
	for _, o := range opts {
		o(l)
	}
	return l
}

type lineLimiter struct {
	r      io.Reader
	limit  int64
	onDrop func(error)

	chunk []byte // read buffer
	in    []byte // unprocessed part of chunk
	ready []byte // bytes to hand out: part of chunk, a line, or a replacement
	line  []byte // the current line so far (its head once it is over the limit)
	over  bool   // the current line is longer than limit
	// lastLong is the length of the last line longer than a read chunk:
	// the capacity the next such line grows to at once.
	lastLong int
	found    bool   // over: the head was scanned, id holds the result
	id       []byte // over: the response id, nil if none
	err      error  // sticky error of r
	// readyOwned: l.ready is one line the limiter has let go of (a long
	// line's own buffer, a replacement), which its reader may keep.
	readyOwned bool
	owned      bool // what Owned reports of the line ReadLine returned last
	// readyStandIn: l.ready is the replacement of an over-long response
	// (tooLargeResponse); standIn is what TooLarge reports of the line
	// ReadLine returned last.
	readyStandIn, standIn bool
}

// ReadLine returns the next line, its '\n' included (the last line at EOF
// may have none), or a replacement response, bounded as newLineReader
// says. The line is valid until the next call of ReadLine unless Owned
// says otherwise: a caller that keeps any of it copies it. At the end it
// returns nil and the error of the underlying reader (io.EOF at a clean
// end).
func (l *lineLimiter) ReadLine() ([]byte, error) {
	l.owned = false
	for len(l.ready) == 0 {
		if err := l.fill(); err != nil {
			return nil, err
		}
	}
	line := l.ready
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i+1]
	}
	l.ready = l.ready[len(line):]
	l.owned = l.readyOwned && len(l.ready) == 0
	l.standIn = l.readyStandIn // a replacement is one line, alone in ready
	return line, nil
}

// TooLarge returns the byte limit when the line ReadLine returned last is
// the replacement of a response longer than it (the server's own line was
// dropped), else 0.
func (l *lineLimiter) TooLarge() int64 {
	if l.standIn {
		return l.limit
	}
	return 0
}

// Owned reports whether the line ReadLine returned last is the caller's to
// keep: the limiter let go of it (a line longer than a read chunk, in a
// buffer of its own) and will not write to it again. A large response is
// then handed on without a copy.
func (l *lineLimiter) Owned() bool { return l.owned }

// fill makes l.ready non-empty, or returns the sticky error once nothing is
// left. It returns nil with l.ready empty when r made no progress.
func (l *lineLimiter) fill() error {
	for len(l.ready) == 0 {
		if len(l.in) > 0 {
			l.process()
			continue
		}
		if l.err != nil {
			if l.flush() {
				continue
			}
			return l.err
		}
		if l.chunk == nil {
			l.chunk = make([]byte, lineChunk)
		}
		n, err := l.r.Read(l.chunk)
		l.in = l.chunk[:n]
		l.err = err
		if n == 0 && err == nil {
			return nil
		}
	}
	return nil
}

// process consumes some of l.in, possibly setting l.ready.
func (l *lineLimiter) process() {
	if l.over {
		l.processOver()
		return
	}
	if len(l.line) == 0 {
		// Fast path: whole lines within the chunk go out as they are.
		end := 0
		for {
			i := bytes.IndexByte(l.in[end:], '\n')
			if i < 0 || int64(i) > l.limit {
				break
			}
			end += i + 1
		}
		if end > 0 {
			l.ready, l.in, l.readyOwned, l.readyStandIn = l.in[:end], l.in[end:], false, false
			return
		}
	}
	i := bytes.IndexByte(l.in, '\n')
	seg := l.in
	if i >= 0 {
		seg = l.in[:i]
	}
	if int64(len(l.line))+int64(len(seg)) > l.limit {
		l.over, l.found, l.id = true, false, nil
		return // processOver takes it from here, seg included
	}
	if i < 0 && len(l.line)+len(seg) > lineChunk && cap(l.line) < l.lastLong {
		// A long line again: grow to the size of the last one at once
		// rather than doubling up to it (a short line that merely spans
		// two reads does not get that size). lastLong was a line within
		// the limit, so it fits.
		l.line = append(make([]byte, 0, l.lastLong), l.line...)
	}
	l.line = append(l.line, seg...)
	if i < 0 {
		l.in = l.in[len(l.in):]
		return
	}
	l.in = l.in[i+1:]
	l.line = append(l.line, '\n')
	if len(l.line) > lineChunk {
		l.lastLong = len(l.line)
	}
	l.ready, l.readyStandIn = l.line, false
	l.readyOwned = l.resetLine() && snug(l.ready)
}

// snug reports whether line may be handed over: a line in a buffer much
// larger than itself (one sized for an earlier, longer line: lastLong) is
// not, since its reader may keep it for good (a tools page), and with it
// the whole buffer.
func snug(line []byte) bool { return cap(line) <= len(line)+len(line)/4 }

// processOver consumes the over-long line: it completes the head, scans it
// once, discards the rest and finishes the line at its newline.
func (l *lineLimiter) processOver() {
	i := bytes.IndexByte(l.in, '\n')
	seg := l.in
	if i >= 0 {
		seg = l.in[:i]
	}
	if !l.found {
		if need := idScanBytes - len(l.line); need > 0 {
			l.line = append(l.line, seg[:min(need, len(seg))]...)
		}
		if len(l.line) >= idScanBytes || i >= 0 {
			l.scanHead()
		}
	}
	if i < 0 {
		l.in = l.in[len(l.in):]
		return
	}
	l.in = l.in[i+1:]
	l.finishOver()
}

func (l *lineLimiter) scanHead() {
	l.id = rawjson.ResponseID(l.line[:min(len(l.line), idScanBytes)])
	l.found = true
	l.resetLine()
}

// finishOver ends an over-long line: a replacement response, or a drop.
func (l *lineLimiter) finishOver() {
	if l.id != nil {
		l.ready, l.readyOwned, l.readyStandIn = tooLargeResponse(l.id, l.limit), true, true
	} else if l.onDrop != nil {
		l.onDrop(fmt.Errorf("dropped a stdout line without a response id: %w",
			&ResponseTooLargeError{Limit: l.limit}))
	}
	l.over, l.found, l.id = false, false, nil
}

// flush handles EOF (or any read error) with a line in progress. It reports
// whether anything changed.
func (l *lineLimiter) flush() bool {
	switch {
	case l.over:
		if !l.found {
			l.scanHead()
		}
		l.finishOver()
		return true
	case len(l.line) > 0:
		l.ready, l.readyOwned, l.readyStandIn = l.line, snug(l.line), false
		l.line = nil
		return true
	}
	return false
}

// resetLine empties the line buffer for the next line and reports
// whether it let go of the buffer (then l.ready, when it holds the line,
// is nobody's but its reader's). Otherwise l.ready may still alias it:
// nothing is appended before l.ready is drained.
func (l *lineLimiter) resetLine() bool {
	if cap(l.line) > shrinkAbove {
		l.line = nil
		return true
	}
	l.line = l.line[:0]
	return false
}

// tooLargeResponse is the JSON-RPC error response that replaces an
// over-long response with the given id.
func tooLargeResponse(id []byte, limit int64) []byte {
	msg := (&ResponseTooLargeError{Limit: limit}).Error()
	b := make([]byte, 0, 96+len(id)+len(msg))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, tooLargeCode, 10)
	b = append(b, `,"message":"`...)
	b = append(b, msg...)
	return append(b, "\"}}\n"...)
}

// bodyLimit is what the readers of limitBody and limitSSE share: the body
// they read, the limit, and the error that ends the body once the limit is
// passed, which every later Read returns. Close closes the body.
type bodyLimit struct {
	rc    io.ReadCloser
	limit int64
	err   error
}

func (l *bodyLimit) Close() error { return l.rc.Close() }

// exceed ends the body: it returns n, the bytes read within the limit, with
// the *ResponseTooLargeError that every later Read returns.
func (l *bodyLimit) exceed(n int) (int, error) {
	l.err = &ResponseTooLargeError{Limit: l.limit}
	return n, l.err
}

// limitBody bounds a plain (non-SSE) HTTP response body to limit (> 0)
// bytes: reading more returns the bytes up to the limit with a
// *ResponseTooLargeError, and every later Read returns it again.
func limitBody(body io.ReadCloser, limit int64) io.ReadCloser {
	return &limitedBody{bodyLimit: bodyLimit{rc: body, limit: limit}, left: limit}
}

type limitedBody struct {
	bodyLimit
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		return b.exceed(int(b.left))
	}
	b.left -= int64(n)
	return n, err
}

// limitSSE bounds each event of a text/event-stream body: the bytes of one
// event (its field lines and their line ends, up to the blank line that
// dispatches it) may be at most limit (> 0). A longer event makes Read
// return the bytes within the limit with a *ResponseTooLargeError, and the
// stream ends there: every later Read returns the error. Lines may end in
// "\n", "\r\n" or "\r".
func limitSSE(body io.ReadCloser, limit int64) io.ReadCloser {
	return &sseLimiter{bodyLimit: bodyLimit{rc: body, limit: limit}, lineStart: true}
}

type sseLimiter struct {
	bodyLimit
	n         int64 // bytes of the current event
	lineStart bool  // the next byte starts a line
	afterCR   bool  // the last byte was a '\r' (a following '\n' is its pair)
	blankCR   bool  // that '\r' ended an event (its '\n' is not counted)
}

func (s *sseLimiter) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.rc.Read(p)
	if k, ok := s.scan(p[:n]); !ok {
		return s.exceed(k)
	}
	return n, err
}

// scan advances the event state over b. It returns false, and how many
// bytes fit, once the current event exceeds the limit.
func (s *sseLimiter) scan(b []byte) (int, bool) {
	for i := 0; i < len(b); {
		j := bytes.IndexAny(b[i:], "\r\n")
		if j < 0 {
			j = len(b) - i
		}
		if j > 0 {
			// Field bytes of a line.
			if s.n+int64(j) > s.limit {
				return i + int(s.limit-s.n), false
			}
			s.n += int64(j)
			s.lineStart, s.afterCR = false, false
			i += j
			continue
		}
		c := b[i]
		switch {
		case c == '\n' && s.afterCR:
			s.afterCR = false
			if !s.blankCR {
				if s.n+1 > s.limit {
					return i, false
				}
				s.n++
			}
		case s.lineStart:
			// A blank line: the event is dispatched, a new one begins.
			s.n = 0
			s.afterCR, s.blankCR = c == '\r', true
		default:
			if s.n+1 > s.limit {
				return i, false
			}
			s.n++
			s.lineStart = true
			s.afterCR, s.blankCR = c == '\r', false
		}
		i++
	}
	return len(b), true
}

// limitResponses enforces limit on every response of next: a plain body
// whose Content-Length is over the limit is closed and the round trip fails
// at once with a *ResponseTooLargeError; otherwise the body is wrapped with
// limitSSE (Content-Type text/event-stream, where the limit is per event and
// Content-Length, if any, is not checked) or limitBody.
func limitResponses(next http.RoundTripper, limit int64) http.RoundTripper {
	if limit <= 0 {
		return next
	}
	return &limitTransport{next: next, limit: limit}
}

type limitTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp == nil || resp.Body == nil {
		return resp, err
	}
	if isEventStream(resp.Header.Get("Content-Type")) {
		resp.Body = limitSSE(resp.Body, t.limit)
		return resp, nil
	}
	if resp.ContentLength > t.limit && req.Method != http.MethodHead {
		resp.Body.Close()
		return nil, &ResponseTooLargeError{Limit: t.limit}
	}
	resp.Body = limitBody(resp.Body, t.limit)
	return resp, nil
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(contentType)), ";")
		mt = strings.TrimSpace(mt)
	}
	return mt == "text/event-stream"
}
