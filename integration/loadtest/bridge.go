package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// bridgeSessionID is the Mcp-Session-Id the bridge hands out on every
// answer: it keeps no sessions, but clients of a 2025 revision expect one
// after initialize.
const bridgeSessionID = "loadtest-bridge"

// bridge is the HTTP floor: a stateless stand-in for the proxy serving
// Streamable HTTP in front of a stdio upstream. It runs argv as a child,
// serves POSTs on a loopback port (announced on stderr as the fixture does),
// writes each body as one line to the child and answers a request with the
// child's reply line as application/json; a notification or a response from
// the client gets 202. It reads nothing of a message but its id, keeps no
// session (DELETE is a no-op, GET has no stream) and drops whatever the
// child sends that answers no pending request (its own requests and
// notifications). It serves until the child's stdout ends or it is killed.
func bridge(argv []string) error {
	cmd, in, out, err := startChild(argv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", loopback+":0")
	if err != nil {
		return errors.Join(err, cmd.Process.Kill(), cmd.Wait())
	}
	b := &bridgeServer{in: in, pending: map[string]chan []byte{}}
	srv := &http.Server{Handler: b}
	readErr := make(chan error, 1)
	go func() {
		readErr <- b.readReplies(out)
		_ = srv.Close()
	}()
	fmt.Fprintf(os.Stderr, "bridge listening on http://%s/mcp\n", ln.Addr())
	err = srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	_ = in.Close()
	return errors.Join(err, <-readErr, cmd.Wait())
}

// bridgeServer matches the child's reply lines to the POSTs waiting for
// them, by id. Safe for concurrent use.
type bridgeServer struct {
	in  io.Writer
	wmu sync.Mutex // one line per write, whole

	mu sync.Mutex
	// pending maps an id (rawjson.IDKey) to the channel of its reply; nil
	// once the child's stdout has ended.
	pending map[string]chan []byte
}

// readReplies hands each line of r that answers a pending request to its
// waiter, until r ends; then it fails every waiter.
func (b *bridgeServer) readReplies(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readLine(br)
		if len(line) > 0 {
			b.deliver(line)
		}
		if err != nil {
			break
		}
	}
	b.mu.Lock()
	for _, ch := range b.pending {
		close(ch)
	}
	b.pending = nil
	b.mu.Unlock()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// readLine returns the next line of br without its newline, in a buffer of
// its own, or an error (io.EOF at the end; a last line without a newline
// comes with it). A line over maxMessageBytes is an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxMessageBytes+1 {
			return nil, fmt.Errorf("line over %d bytes", maxMessageBytes)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// deliver passes line to the request it answers; anything else is dropped.
func (b *bridgeServer) deliver(line []byte) {
	id := rawjson.ResponseID(line)
	if id == nil {
		return
	}
	key := rawjson.IDKey(id)
	b.mu.Lock()
	ch := b.pending[key]
	delete(b.pending, key)
	b.mu.Unlock()
	if ch != nil {
		ch <- line // buffered: the waiter may be gone
	}
}

// ServeHTTP is the Streamable HTTP endpoint, on every path.
func (b *bridgeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "the bridge serves POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessageBytes+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxMessageBytes {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "not one JSON-RPC message: "+err.Error(), http.StatusBadRequest)
		return
	}
	// A raw newline in valid JSON is whitespace between tokens (inside a
	// string it must be escaped), so a space keeps the message one line.
	body = bytes.ReplaceAll(body, []byte("\n"), []byte(" "))
	w.Header().Set("Mcp-Session-Id", bridgeSessionID)
	if rawjson.IsNull(msg.ID) || msg.Method == "" {
		// A notification, or the client's answer to a request of the child.
		if err := b.write(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	key := rawjson.IDKey(msg.ID)
	ch := make(chan []byte, 1)
	b.mu.Lock()
	switch {
	case b.pending == nil:
		b.mu.Unlock()
		http.Error(w, "the upstream has exited", http.StatusBadGateway)
		return
	case b.pending[key] != nil:
		b.mu.Unlock()
		http.Error(w, "a request with this id is already in flight", http.StatusConflict)
		return
	}
	b.pending[key] = ch
	b.mu.Unlock()
	if err := b.write(body); err != nil {
		b.forget(key)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	select {
	case line, ok := <-ch:
		if !ok {
			http.Error(w, "the upstream exited before it answered", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(line)
	case <-r.Context().Done():
		b.forget(key)
	}
}

func (b *bridgeServer) write(msg []byte) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if _, err := b.in.Write(append(msg, '\n')); err != nil {
		return fmt.Errorf("write to the upstream: %w", err)
	}
	return nil
}

func (b *bridgeServer) forget(key string) {
	b.mu.Lock()
	if b.pending != nil {
		delete(b.pending, key)
	}
	b.mu.Unlock()
}
