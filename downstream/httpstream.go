package downstream

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// postStream is the response to one POST. It stays undecided until the
// first message: a response that comes first goes out as JSON; anything
// else (progress, the proxy's question to the client) turns it into an SSE
// stream that carries that message, the ones after it and the response,
// in order. Only the messages of the POST's own requests go on it.
type postStream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	canSSE bool // the client accepts text/event-stream

	mu   sync.Mutex
	sse  bool // the SSE headers are out
	done bool // the response is out, or the stream failed
}

func newPostStream(w http.ResponseWriter, r *http.Request) *postStream {
	return &postStream{w: w, rc: http.NewResponseController(w), canSSE: acceptsSSE(r.Header.Get("Accept"))}
}

// acceptsSSE reports whether an Accept header admits text/event-stream
// (no header admits anything).
func acceptsSSE(accept string) bool {
	if accept == "" {
		return true
	}
	for accept != "" {
		var part string
		part, accept, _ = strings.Cut(accept, ",")
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) { // no copy when already lower case
		case "text/event-stream", "text/*", "*/*":
			return true
		}
	}
	return false
}

// errNoSSE is send's error when the client cannot take a stream.
var errNoSSE = fmt.Errorf("%w: the client does not accept text/event-stream", errStreamGone)

// send writes a message that precedes the response, switching to SSE.
func (s *postStream) send(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errStreamGone
	}
	if !s.sse {
		if !s.canSSE {
			return errNoSSE
		}
		startSSE(s.w)
		s.sse = true
	}
	if err := writeEvent(s.w, s.rc, whole(msg)); err != nil {
		s.done = true
		return err
	}
	return nil
}

// finish writes the replies of the POST's messages: nothing to answer is
// 202; over SSE each reply is an event; otherwise one reply (or, for a
// batch, their array) is the JSON body, with status.
func (s *postStream) finish(replies []reply, batch bool, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	switch {
	case s.sse:
		for _, r := range replies {
			if writeEvent(s.w, s.rc, r) != nil {
				return
			}
		}
	case len(replies) == 0:
		s.w.WriteHeader(http.StatusAccepted)
	default:
		body := replies[0]
		if batch {
			body = whole(replyArray(replies))
		}
		h := s.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(body.size()+1)) // and a newline
		_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		s.w.WriteHeader(status)
		// The writer buffers: the newline needs no copy of the body.
		if body.write(s.w, "", "") == nil {
			_, _ = io.WriteString(s.w, "\n")
		}
	}
}

// getStream is a session's GET stream.
type getStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu     sync.Mutex
	failed bool
}

// open writes the stream's headers at once, so the client knows it is
// listening.
func (g *getStream) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	startSSE(g.w)
	_ = g.rc.Flush()
}

func (g *getStream) send(msg []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed {
		return errStreamGone
	}
	if err := writeEvent(g.w, g.rc, whole(msg)); err != nil {
		g.failed = true
		return err
	}
	return nil
}

// close marks the stream ended: its handler is returning, after which the
// ResponseWriter must not be used. A send under way finishes first (it
// holds mu); a later one, from a broadcast that picked the stream before it
// was detached, gets errStreamGone and writes nothing.
func (g *getStream) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failed = true
}

// comment writes an SSE comment, which keeps an idle connection open.
func (g *getStream) comment(text string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed {
		return errStreamGone
	}
	_ = g.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := fmt.Fprintf(g.w, ": %s\n\n", text); err != nil {
		g.failed = true
		return err
	}
	if err := g.rc.Flush(); err != nil {
		g.failed = true
		return err
	}
	return nil
}

// startSSE writes the headers of an event stream.
func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // no buffering in nginx between the proxy and the client
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
}

// writeEvent writes one message as an SSE event and flushes it.
func writeEvent(w http.ResponseWriter, rc *http.ResponseController, msg reply) error {
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := msg.write(w, "event: message\ndata: ", "\n\n"); err != nil {
		return fmt.Errorf("%w: %w", errStreamGone, err)
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errStreamGone, err)
	}
	return nil
}
