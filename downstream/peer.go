package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// stream carries messages to one client: a stdio connection, the response
// of one HTTP POST (upgraded to SSE when something precedes the response),
// or a session's GET stream.
type stream interface {
	// send writes one JSON-RPC message (no trailing newline). It fails
	// when the stream has ended; it may block while the client reads.
	// Safe for concurrent use.
	send(msg []byte) error
}

// errStreamGone is send's error on a stream that has ended.
var errStreamGone = errors.New("the client's stream has ended")

// clientCaps is what a client declared it can do: in its initialize
// params, or in a 2026-07-28 request's _meta.
type clientCaps struct {
	sampling       bool
	elicitation    bool // form mode (an empty elicitation object means form)
	elicitationURL bool
	roots          bool
}

// parseCaps reads a capabilities object; anything unreadable declares
// nothing.
func parseCaps(raw json.RawMessage) clientCaps {
	var c struct {
		Sampling    json.RawMessage `json:"sampling"`
		Elicitation json.RawMessage `json:"elicitation"`
		Roots       json.RawMessage `json:"roots"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return clientCaps{}
	}
	out := clientCaps{sampling: present(c.Sampling), roots: present(c.Roots)}
	if present(c.Elicitation) {
		var modes struct{ Form, URL json.RawMessage }
		_ = json.Unmarshal(c.Elicitation, &modes) // not an object: form mode, as an empty one
		out.elicitationURL = present(modes.URL)
		// An elicitation capability naming no mode means form (2025-11-25).
		out.elicitation = present(modes.Form) || !present(modes.URL)
	}
	return out
}

func present(v json.RawMessage) bool { return !rawjson.IsNull(v) }

// clientError is a JSON-RPC error the client answered one of the proxy's
// requests with.
type clientError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *clientError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// asks correlates the proxy's own requests to one client (approval
// questions, relayed sampling, elicitation and roots) with the client's
// answers, which arrive on the session's input: stdin, or a POST of the
// session.
type asks struct {
	mu      sync.Mutex
	next    uint64
	pending map[string]chan askReply
	closed  bool
	// prefix, when set, makes the ids strings that start with it (the
	// replica that asks, crossreplica.go); else they are numbers.
	prefix string
}

// setPrefix makes the ids of later questions strings starting with p.
func (a *asks) setPrefix(p string) {
	a.mu.Lock()
	a.prefix = p
	a.mu.Unlock()
}

type askReply struct {
	result json.RawMessage
	err    error
}

// errSessionEnded fails the questions of a session that ended.
var errSessionEnded = errors.New("the client session ended")

// errNotInitialized is a question's error when the client had not sent
// notifications/initialized before the question's time ran out.
var errNotInitialized = errors.New("the client has not sent notifications/initialized")

// ask sends method to the client of s and waits for the answer: on the
// stream of the request the question belongs to (owner), or on the
// session's own stream when no request owns it (owner nil). It is the one
// way the proxy asks a client anything (approval questions, relayed
// sampling, elicitation and roots, login pages), and it keeps the
// lifecycle's rule: no request goes to a client before the client has sent
// notifications/initialized. The question waits for that, for ctx or for
// the session's end. A stateless 2026-07-28 request has no handshake: a
// question within it goes at once.
func (s *session) ask(ctx context.Context, owner *request, method string, params json.RawMessage) (json.RawMessage, error) {
	if owner == nil || !owner.modern {
		select {
		case <-s.initialized:
		case <-s.done:
			return nil, errSessionEnded
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errNotInitialized, ctx.Err())
		}
	}
	out := s.notify.stream()
	if owner != nil {
		out = owner.out
	}
	return s.asks.ask(ctx, out, method, params)
}

// ask sends method to the client on out and waits for the answer, for ctx,
// or for the session to end. The request goes out with an id of the
// proxy's own (a number); params may be nil. Only session.ask calls it.
func (a *asks) ask(ctx context.Context, out stream, method string, params json.RawMessage) (json.RawMessage, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, errSessionEnded
	}
	a.next++
	id := json.RawMessage(strconv.FormatUint(a.next, 10))
	if a.prefix != "" {
		id = rawjson.String(a.prefix + string(id))
	}
	key := rawjson.IDKey(id)
	ch := make(chan askReply, 1)
	if a.pending == nil {
		a.pending = map[string]chan askReply{}
	}
	a.pending[key] = ch
	a.mu.Unlock()
	defer deleteLocked(&a.mu, a.pending, key)
	if err := out.send(clientRequest(id, method, params)); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// deliver hands a response of the client to the question it answers. It
// reports whether one was waiting; the message's bytes are copied.
func (a *asks) deliver(m rawjson.Message) bool {
	a.mu.Lock()
	ch := a.pending[rawjson.IDKey(m.ID)]
	delete(a.pending, rawjson.IDKey(m.ID))
	a.mu.Unlock()
	if ch == nil {
		return false
	}
	var r askReply
	if m.Error != nil {
		ce := &clientError{}
		if json.Unmarshal(m.Error, ce) != nil {
			ce = &clientError{Code: codeInternal, Message: "the client answered with an unreadable error"}
		}
		r.err = ce
	} else {
		r.result = append(json.RawMessage(nil), m.Result...)
	}
	ch <- r // buffered; removed from pending, so it gets one value
	return true
}

// close fails every waiting question and refuses new ones.
func (a *asks) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for key, ch := range a.pending {
		ch <- askReply{err: errSessionEnded}
		delete(a.pending, key)
	}
}

// inflight holds the cancel functions of a session's requests being
// answered, by request id, so that notifications/cancelled reaches them.
type inflight struct {
	mu sync.Mutex
	m  map[string]context.CancelFunc
}

// maxInflight bounds the requests of one session answered at once. A
// request beyond it is refused at once rather than queued: the session's
// input must stay free for the answers running requests wait on.
const maxInflight = 1024

// errTooMany refuses a request over maxInflight.
var errTooMany = errorf(codeServerError, "too many requests in flight on this session (at most %d)", maxInflight)

// errRepeatedID refuses a request whose id is one still being answered.
var errRepeatedID = errorf(codeInvalidRequest, "invalid request: a request with this id is still being answered")

// add registers a request; it refuses one over the bound or with the id of
// one in flight.
func (f *inflight) add(id json.RawMessage, cancel context.CancelFunc) *wireError {
	key := rawjson.IDKey(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]context.CancelFunc{}
	}
	if _, dup := f.m[key]; dup {
		return errRepeatedID
	}
	if len(f.m) >= maxInflight {
		return errTooMany
	}
	f.m[key] = cancel
	return nil
}

func (f *inflight) done(id json.RawMessage) {
	f.mu.Lock()
	delete(f.m, rawjson.IDKey(id))
	f.mu.Unlock()
}

// cancel ends the request with this id, if it is in flight.
func (f *inflight) cancel(id json.RawMessage) {
	f.mu.Lock()
	c := f.m[rawjson.IDKey(id)]
	f.mu.Unlock()
	if c != nil {
		c()
	}
}

// count is how many requests are in flight.
func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// deleteLocked removes key from m while holding mu: the deferred end of a
// waiter registered under mu (an ask's reply channel, a forwarded retry).
func deleteLocked[K comparable, V any](mu *sync.Mutex, m map[K]V, key K) {
	mu.Lock()
	delete(m, key)
	mu.Unlock()
}
