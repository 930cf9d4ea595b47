package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// stdioClient is a raw JSON-RPC client on one line-delimited stream (a
// server's stdout and stdin). One reader goroutine dispatches responses by
// id, so any number of requests can be in flight; it ends when r does.
type stdioClient struct {
	w      io.Writer
	wmu    sync.Mutex // one message per write, whole
	nextID atomic.Int64

	mu      sync.Mutex
	pending map[string]chan *envelope
	// abandoned holds ids whose caller gave up (ctx ended): a late answer
	// to one of them is dropped, an answer to any other unknown id is a
	// protocol error.
	abandoned map[string]bool
	err       error // why the reader ended; set once

	readerDone chan struct{}
}

// newStdioClient starts the reader on r. The caller ends the reader by
// closing r's other end (stopping the process); wait joins it.
func newStdioClient(r io.Reader, w io.Writer) *stdioClient {
	c := &stdioClient{w: w, pending: map[string]chan *envelope{}, abandoned: map[string]bool{}, readerDone: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *stdioClient) read(r io.Reader) {
	defer close(c.readerDone)
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), maxMessageBytes)
	err := io.EOF
	for s.Scan() {
		if err = c.dispatch(s.Bytes()); err != nil {
			break
		}
		err = io.EOF
	}
	if serr := s.Err(); serr != nil {
		err = fmt.Errorf("read: %w", serr)
	}
	c.mu.Lock()
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
}

// dispatch handles one line; an error ends the connection.
func (c *stdioClient) dispatch(line []byte) error {
	if len(line) == 0 {
		return nil
	}
	e, err := parseEnvelope(line)
	if err != nil {
		return fmt.Errorf("%w: %.200s", err, line)
	}
	switch {
	case e.Method != "" && len(e.ID) > 0:
		return c.write(replyToServer(e))
	case e.Method != "":
		return nil // a notification: list_changed, log messages
	}
	key := idKey(e.ID)
	c.mu.Lock()
	ch := c.pending[key]
	delete(c.pending, key)
	late := c.abandoned[key]
	delete(c.abandoned, key)
	c.mu.Unlock()
	if late {
		return nil
	}
	if ch == nil {
		return fmt.Errorf("response to an unknown request id %s", key)
	}
	ch <- e
	return nil
}

func (c *stdioClient) write(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(append(msg, '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// request sends one request and waits for its response or ctx.
func (c *stdioClient) request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	key := fmt.Sprint(id)
	ch := make(chan *envelope, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: connection closed: %w", method, err)
	}
	c.pending[key] = ch
	c.mu.Unlock()
	if err := c.write(encodeRequest(id, method, params)); err != nil {
		c.forget(key)
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case e, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return nil, fmt.Errorf("%s: %w: connection closed: %w", method, errNoResponse, err)
		}
		res, err := e.outcome()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		return res, nil
	case <-ctx.Done():
		c.mu.Lock()
		if _, ok := c.pending[key]; ok {
			delete(c.pending, key)
			c.abandoned[key] = true
		}
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (c *stdioClient) forget(key string) {
	c.mu.Lock()
	if c.pending != nil {
		delete(c.pending, key)
	}
	c.mu.Unlock()
}

// notify sends a notification.
func (c *stdioClient) notify(method string, params json.RawMessage) error {
	return c.write(encodeRequest(-1, method, params))
}

// initialize runs the MCP handshake on c.
func initialize(ctx context.Context, c *stdioClient) error {
	res, err := c.request(ctx, "initialize", initializeParams)
	if err != nil {
		return err
	}
	if err := checkInitialize(res); err != nil {
		return err
	}
	return c.notify("notifications/initialized", nil)
}

// stdioConn is an MCP session with a process over its stdin and stdout.
type stdioConn struct {
	*stdioClient
	proc *proc
}

// dialStdio starts spec (which must have stdio set) and initializes a
// session with it. On error nothing is left running.
func dialStdio(ctx context.Context, f *fleet, spec procSpec) (*stdioConn, error) {
	p, err := f.start(spec)
	if err != nil {
		return nil, err
	}
	c := &stdioConn{stdioClient: newStdioClient(p.stdout, p.stdin), proc: p}
	if err := initialize(ctx, c.stdioClient); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w (%s)", spec.name, err, p.failure()), c.close())
	}
	return c, nil
}

// close stops the process (stdin EOF first) and joins the reader, which
// ends when the process's stdout closes.
func (c *stdioConn) close() error {
	err := c.proc.stop()
	if !waitClosed(c.readerDone, killWait) {
		err = errors.Join(err, fmt.Errorf("%s: stdout reader did not end", c.proc.spec.name))
	}
	return err
}
