package upstream

import (
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// sseRead reads every event of stream through r's reader, fed by src.
func sseRead(src io.Reader) (events []string, lastID string, retry time.Duration, hasRetry bool, err error) {
	r := newSSEReader(src)
	for {
		ev, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return events, r.lastID, r.retry, r.hasRetry, err
		}
		events = append(events, string(ev.typ)+"|"+string(ev.data))
	}
}

// sseReference parses a whole stream the plain way: split into lines at
// "\r\n", "\r" or "\n", then fields, as the EventSource spec says, plus
// the dispatch at the end of the stream of an event with data.
func sseReference(stream string) (events []string, lastID string, retry time.Duration, hasRetry bool) {
	// The last piece is what follows the last line end: a line cut off
	// by the end, applied as a field but never a blank line.
	lines := regexp.MustCompile("\r\n|\r|\n").Split(stream, -1)
	cut := lines[len(lines)-1]
	lines = lines[:len(lines)-1]
	var data []string
	typ, has, idBuf := "", false, ""
	dispatch := func() {
		if has {
			events = append(events, typ+"|"+strings.Join(data, "\n"))
		}
		data, typ, has = nil, "", false
	}
	for i, line := range append(lines, cut) {
		if line == "" {
			if i < len(lines) {
				lastID = idBuf
				dispatch()
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if ok {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data, has = append(data, value), true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf = value
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				if ms, err := strconv.ParseUint(value, 10, 31); err == nil {
					retry, hasRetry = time.Duration(ms)*time.Millisecond, true
				}
			}
		}
	}
	dispatch()
	return events, lastID, retry, hasRetry
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3*sseReadSize+17)
	for _, tc := range []struct {
		name, stream string
		want         []string
		lastID       string
		retry        time.Duration
	}{
		{"one event", "event: message\ndata: {\"a\":1}\n\n", []string{"message|{\"a\":1}"}, "", 0},
		{"no space", "data:x\n\n", []string{"|x"}, "", 0},
		{"two spaces keep one", "data:  x\n\n", []string{"| x"}, "", 0},
		{"multi-line data", "data: a\ndata: b\ndata:\n\n", []string{"|a\nb\n"}, "", 0},
		{"CRLF", "event: e\r\ndata: x\r\n\r\n", []string{"e|x"}, "", 0},
		{"CR alone", "data: x\rdata: y\r\rdata: z\r\r", []string{"|x\ny", "|z"}, "", 0},
		{"comments and unknown fields", ": hi\nfoo: bar\ndata: x\n\n", []string{"|x"}, "", 0},
		{"no data, no event", "event: ping\n\nid: 7\n\n", nil, "7", 0},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []string{"|a", "|b"}, "1", 0},
		{"retry", "retry: 250\n\nretry: x\n\nretry: -5\n\n", nil, "", 250 * time.Millisecond},
		{"event cut by EOF", "data: a\n\ndata: b", []string{"|a", "|b"}, "", 0},
		{"field line cut by EOF", "data: a\ndata: b", []string{"|a\nb"}, "", 0},
		{"long line", "data: " + long + "\n\ndata: after\n\n", []string{"|" + long, "|after"}, "", 0},
		{"type resets", "event: a\n\ndata: x\n\n", []string{"|x"}, "", 0},
		{"id counts at the blank line", "id: 1\ndata: a\n\nid: 2\ndata: b", []string{"|a", "|b"}, "1", 0},
		{"id of an event without data", "id: 5\n\ndata: x\n\n", []string{"|x"}, "5", 0},
	} {
		for _, feed := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"byte by byte", iotest.OneByteReader}} {
			t.Run(tc.name+"/"+feed.name, func(t *testing.T) {
				events, lastID, retry, _, err := sseRead(feed.wrap(strings.NewReader(tc.stream)))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(events, "¶") != strings.Join(tc.want, "¶") || lastID != tc.lastID || retry != tc.retry {
					t.Errorf("events %q id %q retry %v, want %q id %q retry %v", events, lastID, retry, tc.want, tc.lastID, tc.retry)
				}
				refEvents, refID, refRetry, _ := sseReference(tc.stream)
				if strings.Join(refEvents, "¶") != strings.Join(events, "¶") || refID != lastID || refRetry != retry {
					t.Errorf("the reference reads %q id %q retry %v", refEvents, refID, refRetry)
				}
			})
		}
	}
}

// TestSSEReaderReadError: a read error other than EOF ends the stream with
// that error, and an event cut off by it is not dispatched.
func TestSSEReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	events, _, _, _, err := sseRead(src)
	if !errors.Is(err, boom) || strings.Join(events, ",") != "|a" {
		t.Errorf("events %q, err %v", events, err)
	}
}

// TestSSEReaderLetsLargeBuffersGo: after an event larger than
// maxHeldEventBytes, the reader does not keep its buffers.
func TestSSEReaderLetsLargeBuffersGo(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("y", maxHeldEventBytes+1)
	r := newSSEReader(strings.NewReader("data: " + big + "\n\ndata: small\n\n"))
	if ev, err := r.next(); err != nil || len(ev.data) != len(big) {
		t.Fatalf("%d bytes, %v", len(ev.data), err)
	}
	ev, err := r.next()
	if err != nil || string(ev.data) != "small" {
		t.Fatalf("%q, %v", ev.data, err)
	}
	if cap(r.data) > maxHeldEventBytes || len(r.buf) > maxHeldEventBytes {
		t.Errorf("held %d bytes of data and %d of read buffer after the large event", cap(r.data), len(r.buf))
	}
}

// FuzzSSEReader holds the reader, fed in small reads, to the plain
// line-splitting reference.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: x\n\n", "data: a\r\ndata: b\r\n\r\n", "data: a\r\rid: 3\nretry: 10\n\n",
		"event: endpoint\ndata: /m?s=1\n\nevent: message\ndata: {}\n\n", ": c\r\n\r\ndata", "\r\n\r", "data:\r",
	} {
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, stream string, chunk uint8) {
		src := io.Reader(strings.NewReader(stream))
		if chunk > 0 {
			src = &chunkReader{r: src, n: int(chunk)}
		}
		events, lastID, retry, hasRetry, err := sseRead(src)
		if err != nil {
			t.Fatal(err)
		}
		refEvents, refID, refRetry, refHas := sseReference(stream)
		if strings.Join(events, "\x00¶") != strings.Join(refEvents, "\x00¶") || lastID != refID || retry != refRetry || hasRetry != refHas {
			t.Errorf("%q: events %q id %q retry %v, reference %q id %q retry %v", stream, events, lastID, retry, refEvents, refID, refRetry)
		}
	})
}

// chunkReader reads at most n bytes at a time.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), c.n)])
}
