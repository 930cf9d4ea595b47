package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// eventFilter is an SSE response body of an http or sse upstream from which
// the events carrying a request of the server to the proxy are taken out:
// take gets each event's data, and when it takes it (it reports true) the
// event's data lines are left out of what is read; every other byte passes
// unchanged, in order. An event whose data lines are gone still dispatches
// its id (mcp-go records it for resumption) but carries no message.
//
// Events are split and their data assembled exactly as mcp-go's readers do
// (lines end at '\n', with any '\r' and '\n' trimmed off the end; "data:"
// values lose one leading space and are joined by '\n'; an event ends at a
// blank line, and at EOF with data pending), so that what mcp-go reads as a
// message is what take was shown. With messagesOnly (legacy SSE) only
// events of type "message" (or none) carry messages, as in mcp-go's SSE
// client; Streamable HTTP reads every event's data.
//
// An event is held until it is complete (mcp-go acts on whole events
// only); its size is bounded by the limiter below (limitSSE). Not safe for
// concurrent Reads; Close may be called while a Read is blocked.
type eventFilter struct {
	rc           io.ReadCloser
	br           *bufio.Reader
	take         func(data []byte) bool
	messagesOnly bool

	ev    []byte   // the current event's bytes as read
	lines [][2]int // its complete lines: [start, end) in ev, line end included
	out   []byte   // what is ready for Read
	err   error    // the read error, returned once out is drained
	data  []byte   // the joined data of a multi-line event (reused)
}

// maxHeldEventCap: after an event larger than this the event buffer is let
// go, so that one huge event does not pin its memory for the stream's life.
const maxHeldEventCap = 1 << 20

var (
	sseData  = []byte("data:")
	sseEvent = []byte("event:")
)

func newEventFilter(rc io.ReadCloser, messagesOnly bool, take func(data []byte) bool) *eventFilter {
	return &eventFilter{rc: rc, br: bufio.NewReader(rc), take: take, messagesOnly: messagesOnly}
}

func (f *eventFilter) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.fill()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

func (f *eventFilter) Close() error { return f.rc.Close() }

// fill reads up to the end of the next event (or a read error) and sets
// out to what of it passes.
func (f *eventFilter) fill() {
	if cap(f.ev) > maxHeldEventCap {
		f.ev = nil
	}
	f.ev, f.lines = f.ev[:0], f.lines[:0]
	for {
		start := len(f.ev)
		var err error
		for {
			var chunk []byte
			chunk, err = f.br.ReadSlice('\n')
			f.ev = append(f.ev, chunk...)
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil {
			// A line cut off by the end is no line to mcp-go either: it
			// passes as it is. Only at EOF is a pending event dispatched.
			f.err = err
			if errors.Is(err, io.EOF) {
				f.out = f.event()
			} else {
				f.out = f.ev
			}
			return
		}
		f.lines = append(f.lines, [2]int{start, len(f.ev)})
		if len(bytes.TrimRight(f.ev[start:], "\r\n")) == 0 {
			f.out = f.event()
			return
		}
	}
}

// event returns what passes of the event in ev: all of it, or, when take
// takes its data, all but its data lines.
func (f *eventFilter) event() []byte {
	var typ, data []byte
	joined := false // data is f.data's, not a slice of ev
	for _, l := range f.lines {
		line := bytes.TrimRight(f.ev[l[0]:l[1]], "\r\n")
		if v, ok := bytes.CutPrefix(line, sseEvent); ok {
			typ = bytes.TrimSpace(v)
			continue
		}
		v, ok := bytes.CutPrefix(line, sseData)
		if !ok {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		switch {
		case len(data) == 0: // mcp-go's appendSSEData: no '\n' after empty data
			data, joined = v, false
		case !joined:
			data, joined = append(append(append(f.data[:0], data...), '\n'), v...), true
		default:
			data = append(append(data, '\n'), v...)
		}
	}
	if joined {
		f.data = data[:0]
	}
	if len(data) == 0 || f.messagesOnly && len(typ) > 0 && string(typ) != "message" || !f.take(data) {
		return f.ev
	}
	// Every line but the data lines, and any bytes after the last line
	// (cut off by EOF), moved down in place.
	n, rest := 0, 0
	for _, l := range f.lines {
		rest = l[1]
		if !bytes.HasPrefix(f.ev[l[0]:l[1]], sseData) {
			n += copy(f.ev[n:], f.ev[l[0]:l[1]])
		}
	}
	n += copy(f.ev[n:], f.ev[rest:])
	return f.ev[:n]
}
