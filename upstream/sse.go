package upstream

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	typ  []byte // the event field; empty when none was given
	data []byte // the data lines joined by '\n'
	// Both are valid until the next read.
}

// sseReader reads the events of one text/event-stream body, as the
// WHATWG EventSource parser does: lines end at "\n", "\r\n" or "\r"; a line
// starting with ':' is a comment; a field's value loses one leading space;
// data lines are joined by '\n'; an event is dispatched at a blank line, and
// one with no data is not (its id still counts, from its blank line on).
// Unlike a browser it also hands over an event cut off by the clean end of
// the stream when it has data: a server that closes its stream right after
// its last event must not lose it; its id does not count (a resume asks for
// it again).
// Event sizes are bounded by the body (limitSSE); the buffers are reused
// from one event to the next.
type sseReader struct {
	src        io.Reader
	buf        []byte // read ahead: buf[start:end] is not consumed yet
	start, end int
	err        error // the read error, returned once buf is consumed

	// lastID is the id of the last event dispatched ("" none): what a
	// resumed stream asks to follow (Last-Event-ID). idBuf is the id field
	// read last, which becomes lastID at the end of its event: an event cut
	// off before its blank line was not received, so a resume must replay
	// it. hasRetry and retry are the latest reconnection time asked for.
	lastID   string
	idBuf    string
	retry    time.Duration
	hasRetry bool

	// data is the current event's data: its one data line in buf while
	// inBuf (not copied: most events have one), else joined in own, the
	// storage reused from event to event. fill copies an inBuf data out
	// before it moves or replaces buf.
	data    []byte
	own     []byte
	inBuf   bool
	hasData bool
	typ     []byte
	afterCR bool // the last line ended in '\r': a '\n' first is its pair
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{src: r, buf: make([]byte, sseReadSize)}
}

// sseReadSize is the read buffer of an event stream: most events fit.
const sseReadSize = 8 << 10

// maxHeldEventBytes: after an event larger than this its buffers are let
// go, so that one large event does not pin its memory for the stream's life.
const maxHeldEventBytes = 1 << 20

// next returns the next event with data. At the end of the stream it
// returns io.EOF (after an event cut off there, if any), or the read error.
func (r *sseReader) next() (sseEvent, error) {
	if cap(r.own) > maxHeldEventBytes {
		r.own = nil
	}
	if len(r.buf) > maxHeldEventBytes && r.end-r.start <= sseReadSize {
		buf := make([]byte, sseReadSize) // shrink back
		r.end, r.start, r.buf = copy(buf, r.buf[r.start:r.end]), 0, buf
	}
	r.data, r.inBuf, r.typ, r.hasData = nil, false, r.typ[:0], false
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && r.hasData {
				return sseEvent{typ: r.typ, data: r.data}, nil
			}
			return sseEvent{}, err
		}
		if len(line) == 0 {
			r.lastID = r.idBuf // dispatched, with data or without
			if r.hasData {
				return sseEvent{typ: r.typ, data: r.data}, nil
			}
			r.typ = r.typ[:0]
			continue
		}
		r.field(line)
	}
}

// field applies one non-blank line to the event being read.
func (r *sseReader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, ok := bytes.Cut(line, []byte{':'})
	if ok && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if !r.hasData {
			r.data, r.inBuf, r.hasData = value, true, true
			return
		}
		r.keepData()
		r.data = append(append(r.data, '\n'), value...)
		r.own = r.data
	case "event":
		r.typ = append(r.typ[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.idBuf = string(value)
		}
	case "retry":
		if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil && len(value) > 0 && value[0] >= '0' && value[0] <= '9' {
			r.retry, r.hasRetry = time.Duration(ms)*time.Millisecond, true
		}
	}
}

// readLine returns the next line without its end, valid until the next
// call. A line cut off by the end of the stream is applied as a field and
// io.EOF returned: the event then ends at EOF.
func (r *sseReader) readLine() ([]byte, error) {
	for {
		if r.afterCR && r.start < r.end {
			r.afterCR = false
			if r.buf[r.start] == '\n' { // the pair of the '\r' that ended the last line
				r.start++
			}
		}
		if i := bytes.IndexAny(r.buf[r.start:r.end], "\r\n"); i >= 0 {
			line := r.buf[r.start : r.start+i]
			r.afterCR = r.buf[r.start+i] == '\r'
			r.start += i + 1
			return line, nil
		}
		if r.err != nil {
			rest := r.buf[r.start:r.end]
			r.start = r.end
			if len(rest) > 0 && errors.Is(r.err, io.EOF) {
				r.field(rest)
			}
			return nil, r.err
		}
		r.fill()
	}
}

// fill reads more of the stream after the bytes not yet consumed, which
// it first moves to the front; the buffer grows only for a line longer
// than it.
func (r *sseReader) fill() {
	r.keepData()
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) {
		r.buf = append(r.buf, make([]byte, len(r.buf))...)
	}
	n, err := r.src.Read(r.buf[r.end:])
	r.end += n
	if err != nil {
		r.err = err
	}
}

// keepData copies the event's data out of buf into own, if it is in buf.
func (r *sseReader) keepData() {
	if r.inBuf {
		r.own = append(r.own[:0], r.data...)
		r.data, r.inBuf = r.own, false
	}
}

// reset makes r read body, a new connection of the same stream: the last
// event id and the reconnection time carry over, nothing else.
func (r *sseReader) reset(body io.Reader) {
	r.src, r.start, r.end, r.err, r.afterCR = body, 0, 0, nil, false
}

// reconnectDelay is the wait before the stream is reopened: what the
// server asked for (at least minSSEReconnectDelay), else sseReconnectDelay.
func (r *sseReader) reconnectDelay() time.Duration {
	if r.hasRetry {
		return max(r.retry, minSSEReconnectDelay)
	}
	return sseReconnectDelay
}

// cutData is the start of the data of the event a read error cut off:
// its complete data lines, else the data line being read (nil: none). A
// wire reads the id of a response whose event was too long from it.
func (r *sseReader) cutData() []byte {
	if r.hasData {
		return r.data
	}
	line := r.buf[r.start:r.end]
	if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		return bytes.TrimPrefix(v, []byte(" "))
	}
	return nil
}
