package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// refEvent is one event as mcp-go's SSE readers dispatch it.
type refEvent struct {
	typ, data, id string
	hasID         bool
}

// refEvents reads stream the way mcp-go v1.2.1's Streamable HTTP client
// does (readSSEWithCursor): lines split at '\n', '\r' and '\n' trimmed off
// their end, an event dispatched at a blank line when it has data, and
// pending data dispatched at EOF. An event without data still commits its
// id; those are returned too (with data "").
func refEvents(stream []byte) []refEvent {
	br := bufio.NewReader(bytes.NewReader(stream))
	var out []refEvent
	var ev refEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && ev.data != "" {
				ev.hasID = false // not committed at EOF
				out = append(out, ev)
			}
			return out
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if ev.data != "" || ev.hasID {
				out = append(out, ev)
			}
			ev = refEvent{}
			continue
		}
		if v, ok := strings.CutPrefix(line, "event:"); ok {
			ev.typ = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "data:"); ok {
			v = strings.TrimPrefix(v, " ")
			if ev.data == "" {
				ev.data = v
			} else {
				ev.data += "\n" + v
			}
		} else if v, ok := strings.CutPrefix(line, "id:"); ok {
			ev.id, ev.hasID = strings.TrimPrefix(v, " "), true
		}
	}
}

// filterAll reads stream through an eventFilter whose take takes the data
// for which takeIt is true, in reads of readSize bytes, and returns what
// passed and the data take was shown.
func filterAll(t testing.TB, stream []byte, messagesOnly bool, readSize int, takeIt func(string) bool) (string, []string) {
	t.Helper()
	var shown []string
	f := newEventFilter(io.NopCloser(bytes.NewReader(stream)), messagesOnly, func(data []byte) bool {
		shown = append(shown, string(data))
		return takeIt(string(data))
	})
	var out bytes.Buffer
	buf := make([]byte, readSize)
	for {
		n, err := f.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("read: %v", err)
			}
			return out.String(), shown
		}
	}
}

func takeNone(string) bool { return false }
func takeAll(string) bool  { return true }

// TestEventFilterPassesAsIs: what is not taken passes byte for byte, in any
// read size, whatever the framing.
func TestEventFilterPassesAsIs(t *testing.T) {
	stream := "event: endpoint\ndata: /message?x=1\n\n" +
		": a comment\r\n\r\n" +
		"id: 4\r\nretry: 10\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n" +
		"data: a\ndata:b\ndata:\n\n\n\n" +
		"data: " + strings.Repeat("x", 10000) + "\n\n" +
		"data: pending at eof\ndata: cut"
	for _, size := range []int{1, 7, 4096, 1 << 16} {
		got, shown := filterAll(t, []byte(stream), false, size, takeNone)
		if got != stream {
			t.Errorf("read size %d: the stream changed:\n%.300q\nwant\n%.300q", size, got, stream)
		}
		// "data:" after data adds a '\n', as mcp-go's appendSSEData does.
		want := []string{"/message?x=1", `{"jsonrpc":"2.0","id":1,"result":{}}`, "a\nb\n", strings.Repeat("x", 10000), "pending at eof"}
		if strings.Join(shown, "|") != strings.Join(want, "|") {
			t.Errorf("read size %d: take was shown %.300q, want %.300q", size, shown, want)
		}
	}
}

// TestEventFilterTakes: a taken event loses its data lines only; what
// mcp-go then reads of it is an event with no data, its id committed.
func TestEventFilterTakes(t *testing.T) {
	for _, tc := range []struct {
		name, in, out string
		messagesOnly  bool
		shown         []string
	}{
		{name: "one data line", in: "event: message\nid: 9\ndata: {\"id\":1,\"method\":\"ping\"}\n\ndata: next\n\n",
			out: "event: message\nid: 9\n\ndata: next\n\n", shown: []string{`{"id":1,"method":"ping"}`, "next"}},
		{name: "data lines joined as mcp-go joins them", in: "data:\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n",
			out: "\r\n", shown: []string{"{\"a\":\n1}"}},
		{name: "one leading space dropped", in: "data:  x\n\n", out: "\n", shown: []string{" x"}},
		{name: "pending at eof", in: "id: 1\ndata: x\ndata: cut", out: "id: 1\ndata: cut", shown: []string{"x"}},
		{name: "legacy: endpoint and other types not offered", messagesOnly: true,
			in:  "event: endpoint\ndata: /m\n\nevent: other\ndata: o\n\nevent: message\ndata: m\n\ndata: d\n\n",
			out: "event: endpoint\ndata: /m\n\nevent: other\ndata: o\n\nevent: message\n\n\n", shown: []string{"m", "d"}},
		{name: "streamable: every type offered", in: "event: other\ndata: o\n\n", out: "event: other\n\n", shown: []string{"o"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 3, 4096} {
				got, shown := filterAll(t, []byte(tc.in), tc.messagesOnly, size, func(d string) bool { return d != "next" })
				if got != tc.out {
					t.Errorf("read size %d: got %q, want %q", size, got, tc.out)
				}
				if strings.Join(shown, "|") != strings.Join(tc.shown, "|") {
					t.Errorf("read size %d: shown %q, want %q", size, shown, tc.shown)
				}
			}
		})
	}
}

// TestEventFilterReadError: a read error mid-event passes what was read,
// then the error; the unfinished event is not offered (mcp-go drops it).
func TestEventFilterReadError(t *testing.T) {
	boom := errors.New("boom")
	f := newEventFilter(io.NopCloser(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))), false,
		func(data []byte) bool {
			if string(data) != "a" {
				t.Errorf("offered %q", data)
			}
			return false
		})
	got, err := io.ReadAll(f)
	if string(got) != "data: a\n\ndata: b\n" || !errors.Is(err, boom) {
		t.Errorf("got %q, %v", got, err)
	}
}

// FuzzEventFilter: against a transliteration of mcp-go's reader, take is
// shown exactly the data of the events mcp-go would dispatch; a stream
// whose events are all taken reads, to mcp-go, as the same events without
// data (ids committed alike); a stream of which nothing is taken passes
// byte for byte.
func FuzzEventFilter(f *testing.F) {
	for _, s := range []string{
		"data: x\n\n", "event: message\nid: 1\ndata: {}\n\n", "data:a\r\ndata:b\r\n\r\n", "data: x", ":c\n\n\n",
		"data:\ndata:\ndata: y\n\nid: 2\n\n", "data: a\rdata: b\n\n", "event:message\ndata\ndata: z\n\n",
	} {
		f.Add([]byte(s), uint8(5))
	}
	f.Fuzz(func(t *testing.T, stream []byte, size uint8) {
		readSize := int(size)%64 + 1
		ref := refEvents(stream)
		var want []string
		for _, e := range ref {
			if e.data != "" {
				want = append(want, e.data)
			}
		}
		got, shown := filterAll(t, stream, false, readSize, takeNone)
		if got != string(stream) {
			t.Fatalf("untaken stream changed: %q -> %q", stream, got)
		}
		if strings.Join(shown, "\x00") != strings.Join(want, "\x00") || len(shown) != len(want) {
			t.Fatalf("shown %q, mcp-go dispatches %q", shown, want)
		}
		taken, _ := filterAll(t, []byte(stream), false, readSize, takeAll)
		after := refEvents([]byte(taken))
		var ids, idsAfter []string
		for _, e := range ref {
			if e.hasID {
				ids = append(ids, e.id)
			}
		}
		for _, e := range after {
			if e.data != "" {
				t.Fatalf("a taken event still carries data %q: %q -> %q", e.data, stream, taken)
			}
			if e.hasID {
				idsAfter = append(idsAfter, e.id)
			}
		}
		if strings.Join(ids, "\x00") != strings.Join(idsAfter, "\x00") || len(ids) != len(idsAfter) {
			t.Fatalf("ids %q became %q", ids, idsAfter)
		}
	})
}
