package downstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// maxRequestBytes caps one client message (a stdio line, an HTTP body): room
// for a tool call that carries a large file, but bounded, so a broken client
// cannot make the proxy buffer without end.
const maxRequestBytes = 32 << 20

// stdioDrain is how long in-flight requests may run after stdin reaches EOF
// or a shutdown signal (docs/operations.md#shutdown-and-reload: in-flight calls get up to 10 s).
const stdioDrain = 10 * time.Second

// stdioFront is the stdio transport: it frames a client's lines into
// messages for the route and writes what answers them, one line each.
type stdioFront struct {
	route    messageRoute
	sessions *sessionTable
	agents   agentResolver
}

// messageRoute is what a transport needs of the route: it hands over the
// messages it framed (route.go).
type messageRoute interface {
	receiveBatch(ctx context.Context, s *session, msgs [][]byte, first rawjson.Message, parsed, batch bool, out stream, in inbound) (answer func() []reply)
	receiveMessage(ctx context.Context, s *session, m rawjson.Message, out stream, in inbound) (refusal []byte, code int, run func() (reply, int))
	receiveParsed(ctx context.Context, s *session, m rawjson.Message, err error, out stream, in inbound) (refusal []byte, code int, run func() (reply, int))
}

// agentResolver resolves the agent a session serves.
type agentResolver interface {
	resolveAgent(name string) (*filter.Agent, error)
}

// ServeStdio serves one session for agent ("" = the default agent) on
// in/out until in reaches EOF or ctx ends, with the session's per-call
// allow-list perCall (nil = none). Only protocol messages are written to
// out. An unknown agent is an error wrapping filter.ErrUnknownAgent.
//
// Every line is one message, answered through the route (route.go).
// Requests run concurrently, each on a worker; responses are written as
// they complete. At EOF or when ctx ends, requests in flight get up to
// stdioDrain to finish, then the rest are cancelled.
func (sf *stdioFront) serve(ctx context.Context, agent string, perCall []string, in io.Reader, out io.Writer) error {
	a, err := sf.agents.resolveAgent(agent)
	if err != nil {
		return err
	}
	pout, restoreOut := pollableOutput(out, in, os.Stderr)
	defer restoreOut() // after the session's last notification
	w := &lineWriter{out: pout, gone: make(chan struct{})}
	s := newSession("stdio", transportStdio, a, perCall)
	s.notify.attach(w)
	sf.sessions.add(s)
	defer sf.sessions.remove(s)

	// Requests run under callCtx, which outlives a signal (ctx) until the
	// drain is over.
	callCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	var runs requestRuns
	readDone := make(chan error, 1)
	in, restore := pollableInput(in, out)
	defer restore()
	go sf.readStdio(callCtx, s, in, w, &runs, readDone)
	select {
	case err = <-readDone:
	case <-ctx.Done():
	case <-w.gone:
		// The client stopped reading (a broken pipe): the session is over,
		// even if its stdin stays open. A proxy whose responses went to
		// descriptor 1 itself was killed by SIGPIPE here.
	}
	s.endInput()
	sf.drain(s, stdioDrain)
	cancelCalls()
	runs.closeAndWait()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// drain waits until no request of s is in flight, at most d.
func (sf *stdioFront) drain(s *session, d time.Duration) {
	deadline := time.Now().Add(d)
	for s.inflight.count() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// stdioReader reads a stdio client's lines and routes them. One goroutine
// at a time holds the reader role (the bufio.Reader is only ever used by
// it). When a line is a request, the holder first gives the role to a
// worker (workers.run: an idle one, which is already waiting, or a new one)
// and then answers the request itself, on the goroutine that read it: the
// request's own path wakes no other goroutine, while the next line is read
// at once by the new holder, so a slow call never holds up the lines after
// it (a notifications/cancelled for it among them). Notifications and
// responses of the client are handled by the holder in the order they
// come, as before.
type stdioReader struct {
	p    *stdioFront
	ctx  context.Context
	s    *session
	br   *bufio.Reader
	w    *lineWriter
	pool *workers
	runs *requestRuns
	done chan<- error // gets the error that ended reading (io.EOF at a clean end), once
}

// readStdio starts reading and routing client lines; done gets the error
// that ended reading.
func (sf *stdioFront) readStdio(ctx context.Context, s *session, in io.Reader, w *lineWriter, runs *requestRuns, done chan<- error) {
	r := &stdioReader{p: sf, ctx: ctx, s: s, br: bufio.NewReaderSize(in, 64<<10), w: w, pool: newWorkers(), runs: runs, done: done}
	r.read()
}

// read holds the reader role: it reads lines until one is a request or the
// input ends, and answers that request after passing the role on.
func (r *stdioReader) read() {
	for {
		line, err := readLine(r.br, maxRequestBytes)
		job := r.route(line, err)
		if errors.Is(err, errLineTooLong) {
			err = nil // answered; reading goes on
		}
		if err != nil {
			r.done <- err
			if job != nil {
				job()
			}
			return
		}
		if job != nil {
			r.pool.run(r.read)
			job()
			return
		}
	}
}

// route handles one line and returns the work that answers it, if any
// (runs counts it from here); messages that need no work off the read loop
// are answered here. Once the session has stopped taking requests
// (runs.closeAndWait), a line holding one is dropped unanswered: the proxy
// is ending, and no request may start after ServeStdio has waited for the
// last one. Responses and notifications on a line of their own are still
// delivered; a batch is dropped whole.
func (r *stdioReader) route(line []byte, err error) func() {
	p, ctx, s, w := r.p, r.ctx, r.s, r.w
	trimmed := bytes.TrimSpace(line)
	switch {
	case errors.Is(err, errLineTooLong):
		_ = w.send(errorResponse(nil, errorf(codeInvalidRequest, "request exceeds the %d-byte limit", maxRequestBytes)))
	case !utf8.Valid(trimmed):
		_ = w.send(errorResponse(nil, notUTF8))
	case len(trimmed) > 0 && trimmed[0] == '[':
		// A batch: its replies go out together, as one array, when the
		// session's protocol version has batches.
		if werr := batchRefusal(s.version()); werr != nil {
			_ = w.send(errorResponse(nil, werr))
			return nil
		}
		msgs, _, werr := splitBody(line)
		if werr != nil {
			_ = w.send(errorResponse(nil, werr))
			return nil
		}
		if !r.runs.start() {
			return nil
		}
		answer := p.route.receiveBatch(ctx, s, msgs, rawjson.Message{}, false, true, w, inbound{})
		return func() {
			defer r.runs.done()
			if all := answer(); len(all) > 0 {
				_ = w.send(replyArray(all))
			}
		}
	case len(trimmed) > 0:
		m, perr := parseMessage(line)
		if perr == nil && (m.Kind == rawjson.KindResponse || m.Kind == rawjson.KindNotification) {
			_, _, _ = p.route.receiveMessage(ctx, s, m, w, inbound{}) // delivered at once: no run
			return nil
		}
		if !r.runs.start() {
			return nil
		}
		refusal, _, run := p.route.receiveParsed(ctx, s, m, perr, w, inbound{})
		if refusal != nil {
			_ = w.send(refusal)
		}
		if run == nil {
			r.runs.done()
			return nil
		}
		return func() {
			defer r.runs.done()
			resp, _ := run()
			_ = w.sendReply(resp)
		}
	}
	return nil
}

// requestRuns counts the requests of a stdio session being answered, so
// that its end can wait for them, and stops new ones from starting once
// that wait has begun (a sync.WaitGroup must not be added to while it is
// waited on at zero).
type requestRuns struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// start counts a request about to be answered; false once closeAndWait ran.
func (rr *requestRuns) start() bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.closed {
		return false
	}
	rr.wg.Add(1)
	return true
}

// done ends what start counted.
func (rr *requestRuns) done() { rr.wg.Done() }

// closeAndWait lets no request start any more and waits for those running.
func (rr *requestRuns) closeAndWait() {
	rr.mu.Lock()
	rr.closed = true
	rr.mu.Unlock()
	rr.wg.Wait()
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its line ending. A message (the
// line without "\n" or "\r\n") longer than max is consumed and reported as
// errLineTooLong without being kept, also when it is the last line before
// EOF (the next call then returns io.EOF).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			// Keep at most max bytes plus a line ending; more cannot fit.
			if len(line)+len(chunk) > max+2 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			tooLong = len(line) > max
		}
		if tooLong {
			return nil, errLineTooLong
		}
		return line, err
	}
}

// lineWriter writes whole messages as lines to a stdio client, one at a
// time. After a write error (the client is gone) every send fails, and
// gone, when not nil, is closed.
type lineWriter struct {
	mu   sync.Mutex
	out  io.Writer
	err  error
	gone chan struct{}
}

func (w *lineWriter) send(msg []byte) error { return w.sendReply(whole(msg)) }

// sendReply writes one message and its newline.
func (w *lineWriter) sendReply(r reply) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if err := r.write(w.out, "", "\n"); err != nil {
		w.err = fmt.Errorf("%w: %w", errStreamGone, err)
		if w.gone != nil {
			close(w.gone)
		}
	}
	return w.err
}
