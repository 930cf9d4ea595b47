package downstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// maxRequestBytes caps one client message (a stdio line, an HTTP body): room
// for a tool call that carries a large file, but bounded, so a broken client
// cannot make the proxy buffer without end.
const maxRequestBytes = 32 << 20

// stdioDrain is how long in-flight calls may run after stdin reaches EOF
// (SPEC §3: in-flight calls get up to 10 s at shutdown).
const stdioDrain = 10 * time.Second

// stdioWorkers is mcp-go's tool-call worker pool size on stdio. Its default
// of 5 serializes a busy host; 100 is mcp-go's maximum.
const stdioWorkers = 100

// ServeStdio serves one session for agent ("" = the default agent) on
// in/out until in reaches EOF or ctx ends, with the session's per-call
// allow-list perCall (nil = none). Only protocol messages are written to
// out. An unknown agent is an error wrapping filter.ErrUnknownAgent.
func (p *Proxy) ServeStdio(ctx context.Context, agent string, perCall []string, in io.Reader, out io.Writer) error {
	st, err := p.newState(agent, perCall)
	if err != nil {
		return err
	}
	p.states.Store("stdio", st)
	ctx = context.WithValue(ctx, agentKey{}, st.agent.Name)
	pd := newPending(p)
	defer pd.release()
	w := &stdioWriter{out: out, pd: pd}
	pd.direct = w.writeMessage
	pd.fastCalls = true
	pr, pw := io.Pipe()

	srv := server.NewStdioServer(p.mcp)
	server.WithWorkerPoolSize(stdioWorkers)(srv)
	server.WithQueueSize(10000)(srv)
	srv.SetErrorLogger(log.New(zlogWriter{p.log}, "", 0))

	// mcp-go cancels every running handler when its context ends, so it
	// gets a context of its own: a signal (ctx) first lets in-flight calls
	// finish, at most stdioDrain, like stdin EOF does (SPEC §3).
	lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer lcancel()
	pd.callCtx = lctx
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		err := p.pumpStdin(ctx, lctx, in, pw, pd, w, st)
		pw.CloseWithError(err)
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.drain(context.Background(), pd)
			lcancel()
			pw.CloseWithError(io.EOF)
		case <-lctx.Done():
		}
	}()
	err = srv.Listen(lctx, pr, w)
	lcancel()
	_ = pr.Close()
	if ctx.Err() == nil {
		<-pumpDone
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// pumpStdin reads client lines, passes each through the wire layer and on to
// mcp-go. At EOF it waits for in-flight tool calls (at most stdioDrain)
// before ending mcp-go's input, because mcp-go cancels running handlers when
// its input ends. Answers the wire layer writes itself run under answerCtx,
// which outlives a shutdown signal (ctx) until the drain is over.
func (p *Proxy) pumpStdin(ctx, answerCtx context.Context, in io.Reader, pw io.Writer, pd *pending, w *stdioWriter, st *sessionState) error {
	br := bufio.NewReaderSize(in, 64<<10)
	answers := make(chan struct{}, maxDirectAnswers)
	pool := newWorkers()
	for {
		line, err := readLine(br, maxRequestBytes)
		if errors.Is(err, errLineTooLong) {
			w.writeMessage([]byte(fmt.Sprintf(
				`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request exceeds the %d-byte limit"}}`, maxRequestBytes)))
			continue
		}
		if answer, call := pd.directAnswer(line, st); answer != nil {
			release := func() {}
			if !call {
				// At most maxDirectAnswers at once: backpressure on the
				// client. Tool calls are bounded by maxDirectCalls instead,
				// since the loop must go on reading the answers they wait on.
				answers <- struct{}{}
				release = func() { <-answers }
			}
			pd.answering.Add(1)
			pool.run(func() {
				defer func() { release(); pd.answering.Add(-1) }()
				w.writeMessage(answer(answerCtx))
			})
		} else if len(bytes.TrimSpace(line)) > 0 {
			msg, wait := pd.inbound(line, st)
			msg = append(msg, '\n')
			if wait {
				go func() {
					p.waitStartup(ctx)
					pd.prepare(ctx)
					_, _ = pw.Write(msg) // io.Pipe serializes concurrent writes
				}()
			} else if _, werr := pw.Write(msg); werr != nil {
				return nil
			}
		}
		if err == io.EOF {
			p.drain(context.Background(), pd)
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// maxDirectAnswers bounds the resources/prompts requests of one stdio
// session answered at once.
const maxDirectAnswers = 64

// drain waits until no tool call of pd is in flight and every answer the
// wire layer writes itself is out, at most stdioDrain.
func (p *Proxy) drain(ctx context.Context, pd *pending) {
	deadline := time.Now().Add(stdioDrain)
	for time.Now().Before(deadline) && ctx.Err() == nil && (pd.callsInFlight() || pd.answering.Load() > 0) {
		time.Sleep(20 * time.Millisecond)
	}
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

// stdioWriter is the writer mcp-go's stdio server writes to. mcp-go writes
// one whole message line per Write; each passes the wire layer.
type stdioWriter struct {
	mu  sync.Mutex
	out io.Writer
	pd  *pending
	buf []byte
}

func (w *stdioWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		msg := w.buf[:i]
		out := w.pd.outbound(msg)
		var err error
		if sameBytes(out, msg) {
			_, err = w.out.Write(w.buf[:i+1])
		} else {
			_, err = w.out.Write(append(out, '\n'))
		}
		w.buf = w.buf[i+1:]
		if err != nil {
			return 0, err
		}
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(b), nil
}

// writeMessage writes one message the proxy writes itself (a direct answer,
// a progress notification). None of them is a response outbound rewrites,
// so unless mcp-go left a partial line, msg goes out as it is, without
// being copied into the line buffer (a large result is not copied again).
func (w *stdioWriter) writeMessage(msg []byte) {
	w.mu.Lock()
	if len(w.buf) == 0 {
		_, _ = w.out.Write(append(msg, '\n'))
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	_, _ = w.Write(append(msg, '\n'))
}

// sameBytes reports whether a and b are the same slice (not just equal).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
