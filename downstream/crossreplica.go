package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// Messages between replicas sharing a Redis store
// (docs/shared-state.md#messages-between-replicas). A session's stream and
// a call running upstream stay on the replica that has them; what must
// reach them goes there through the store's inboxes (store.Messages):
//
//   - notify: a message for a session's own stream (a log message, a
//     resource update, anything no request owns) raised on a replica that
//     does not hold that stream goes to the replica that does. The holder
//     is the replica of the session's latest GET stream; it records itself
//     under the session's digest while the stream is open. A list_changed
//     of the catalog is not forwarded: every replica learns it from its own
//     connection to the server and tells the streams it holds.
//   - answer: the proxy's questions to a session's client (relayed
//     elicitation, sampling, roots; approval questions) carry ids naming
//     the replica that asked ("<replica>.<n>"). The client's answer, POSTed
//     to any replica, goes to the one whose call waits for it.
//   - resume, reply, cancel: a stateless client's retry of a parked call
//     (roundtrip.go) names, in its sealed state, the replica holding the
//     call. Another replica forwards the retry there and waits for the
//     round's outcome; when the holder is gone (stopped, killed) it stops
//     waiting with an error within a few seconds and does not send the
//     call again: a call that was running there is lost with it. The
//     call's progress meanwhile comes back too, for the client's request.
//
// With the memory store there is no crossReplica (env.cross is nil) and
// none of this runs.
type crossReplica struct {
	bus   *store.Messages
	keys  *store.Keys
	relay *relay
	log   zerolog.Logger

	queue chan outgoing // notifications, sent in order by one goroutine

	mu      sync.Mutex
	local   map[string]*session           // sessions known here, by digest
	digests map[*session]string           //
	waits   map[string]*forwarded         // forwarded retries waiting for their reply, by correlation id
	running map[string]context.CancelFunc // retries run here for another replica
	holds   map[string]*holding           // sessions whose stream is held here, by digest
}

// outgoing is a notification for the stream of the session of digest.
type outgoing struct {
	digest string
	msg    []byte
}

// Kinds of message, and the holder kind of a session's stream.
const (
	msgNotify   = "notify"
	msgAnswer   = "answer"
	msgResume   = "resume"
	msgReply    = "reply"
	msgCancel   = "cancel"
	msgProgress = "progress"
	holdsStream = "stream"
)

// crossQueue bounds the notifications waiting to be forwarded; beyond it
// they are dropped (as a stream that cannot keep up drops them).
const crossQueue = 1024

// aliveCheck is how often a forwarded retry checks that the replica
// holding its call is still there.
const aliveCheck = time.Second

// newCrossReplica starts the inbox of this replica on st (a Redis store).
func newCrossReplica(e *env, st *store.Store) *crossReplica {
	c := &crossReplica{keys: st.Keys(), queue: make(chan outgoing, crossQueue),
		local: map[string]*session{}, digests: map[*session]string{},
		waits: map[string]*forwarded{}, running: map[string]context.CancelFunc{}, holds: map[string]*holding{}}
	c.log = e.log
	c.bus = st.Messages(c.receive)
	go c.sendQueued()
	return c
}

// self is this replica's id ("" without a crossReplica).
func (c *crossReplica) self() string {
	if c == nil {
		return ""
	}
	return c.bus.Self()
}

// adopt wires an HTTP session known to this replica to the others: its
// questions get ids naming this replica, and its unowned messages go to
// the holder of its stream when this replica does not hold it.
func (c *crossReplica) adopt(s *session) {
	if c == nil || s.transport != transportHTTP || s.id == "" {
		return
	}
	d := c.keys.SessionID(s.id)
	c.mu.Lock()
	c.local[d], c.digests[s] = s, d
	c.mu.Unlock()
	s.asks.setPrefix(c.self() + ".")
	s.notify.setRemote(func(msg []byte) {
		select {
		case c.queue <- outgoing{digest: d, msg: msg}:
		default:
			c.log.Warn().Msg("a notification for a session whose stream another replica holds was dropped: too many waiting")
		}
	})
}

// forget drops an ended session.
func (c *crossReplica) forget(s *session) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if d, ok := c.digests[s]; ok {
		delete(c.digests, s)
		if c.local[d] == s {
			delete(c.local, d)
		}
	}
	c.mu.Unlock()
}

func (c *crossReplica) session(digest string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.local[digest]
}

func (c *crossReplica) digest(s *session) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.digests[s]
}

// hold records this replica as the holder of s's stream until the
// returned function is called, renewing the record meanwhile. A session
// may have several streams here at once (a newer GET replaces an older one
// while both are open): the record goes when the last ends. Without a
// crossReplica it does nothing.
func (c *crossReplica) hold(s *session) (release func()) {
	d := ""
	if c != nil {
		d = c.digest(s)
	}
	if d == "" {
		return func() {}
	}
	first := false
	c.mu.Lock()
	h := c.holds[d]
	if h == nil {
		h = &holding{stop: make(chan struct{}), done: make(chan struct{})}
		c.holds[d] = h
		first = true
	}
	h.n++
	c.mu.Unlock()
	if first {
		// Recorded before the stream opens: once the client sees it open,
		// the other replicas find it.
		if err := c.bus.Hold(context.Background(), holdsStream, d); err != nil {
			c.log.Warn().Str("error", sanitize.Error(err.Error())).Msg("a session's stream could not be recorded in the store; messages raised on other replicas do not reach it until it is")
		}
		go c.renew(d, h)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			h.n--
			last := h.n == 0
			if last {
				delete(c.holds, d)
			}
			c.mu.Unlock()
			if last {
				close(h.stop)
				<-h.done
			}
		})
	}
}

// holding is the record of a session's streams held here.
type holding struct {
	n          int
	stop, done chan struct{}
}

// renew renews the record of this replica as the holder of digest's
// stream until h stops, then removes it (unless another replica has taken
// it since).
func (c *crossReplica) renew(d string, h *holding) {
	defer close(h.done)
	t := time.NewTicker(store.HoldTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			_ = c.bus.Release(context.Background(), holdsStream, d)
			return
		case <-t.C:
			_ = c.bus.Hold(context.Background(), holdsStream, d)
		}
	}
}

// sendQueued forwards queued notifications to the holders of their
// sessions' streams, in order.
func (c *crossReplica) sendQueued() {
	for o := range c.queue {
		ctx := context.Background()
		holder, ok, err := c.bus.Holder(ctx, holdsStream, o.digest)
		if err != nil || !ok || holder == c.self() {
			continue // no stream anywhere: dropped, as without replicas
		}
		if err := c.bus.Send(ctx, holder, store.Message{Kind: msgNotify, Target: o.digest, Body: o.msg}); err != nil {
			c.log.Warn().Str("error", sanitize.Error(err.Error())).Msg("a notification could not be forwarded to the replica holding its session's stream")
		}
	}
}

// forwardAnswer sends a client's response to a question another replica
// asked (its id names that replica). It reports whether it did.
func (c *crossReplica) forwardAnswer(ctx context.Context, s *session, m rawjson.Message) bool {
	if c == nil {
		return false
	}
	var id string
	if json.Unmarshal(m.ID, &id) != nil {
		return false
	}
	replica, _, ok := strings.Cut(id, ".")
	d := c.digest(s)
	if !ok || replica == c.self() || d == "" || !isReplicaID(replica) {
		return false
	}
	body := clientResponse(m)
	if err := c.bus.Send(ctx, replica, store.Message{Kind: msgAnswer, Target: d, Body: body}); err != nil {
		c.log.Warn().Str("error", sanitize.Error(err.Error())).Msg("a client's answer could not be forwarded to the replica that asked")
		return false
	}
	return true
}

// isReplicaID reports whether s looks like a replica id (lowercase hex).
func isReplicaID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// clientResponse is the JSON-RPC response m, rebuilt from its members.
func clientResponse(m rawjson.Message) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(m.ID)
	if m.Error != nil {
		b.WriteString(`,"error":`)
		b.Write(m.Error)
	} else {
		b.WriteString(`,"result":`)
		b.Write(emptyIfNil(m.Result))
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// resumeRequest is a forwarded retry: the round's state, the client's
// answers and the retry's _meta (its progress token).
type resumeRequest struct {
	State     roundState      `json:"s"`
	Responses json.RawMessage `json:"r,omitempty"`
	Meta      json.RawMessage `json:"m,omitempty"`
}

// forwarded is a retry waiting for the replica holding its call: the
// round's outcome arrives on reply, the progress sent before it on
// progress, in the order the holder sent them.
type forwarded struct {
	reply    chan []byte
	progress chan []byte
}

// forwardedProgress bounds the progress of a forwarded retry waiting to be
// written; beyond it, progress is dropped (the latest value comes again).
const forwardedProgress = 64

// resumeReply is the round's outcome, back to the replica that forwarded
// the retry.
type resumeReply struct {
	Result json.RawMessage `json:"r,omitempty"`
	Input  json.RawMessage `json:"i,omitempty"` // the next input_required result
	Error  *wireError      `json:"e,omitempty"`
}

// resumeRemote forwards r, the retry of a call parked on replica
// st.Holder, and waits for the round's outcome.
func (c *crossReplica) resumeRemote(ctx context.Context, r *request, st roundState) (json.RawMessage, *inputRequired, *wireError) {
	holder := st.Holder
	resp, _, _ := rawjson.Get(r.params, "inputResponses")
	body, _ := json.Marshal(resumeRequest{State: st, Responses: resp, Meta: r.meta}) // never fails: valid JSON and plain values
	corr := randid.Hex(16)
	fw := &forwarded{reply: make(chan []byte, 1), progress: make(chan []byte, forwardedProgress)}
	c.mu.Lock()
	c.waits[corr] = fw
	c.mu.Unlock()
	defer deleteLocked(&c.mu, c.waits, corr)
	if err := c.bus.Send(ctx, holder, store.Message{Kind: msgResume, Corr: corr, Body: body}); err != nil {
		return nil, nil, storeError(err)
	}
	t := time.NewTicker(aliveCheck)
	defer t.Stop()
	for {
		select {
		case b := <-fw.progress:
			_ = r.out.send(b)
		case b := <-fw.reply:
			for drained := false; !drained; { // what came before the reply goes out before it
				select {
				case p := <-fw.progress:
					_ = r.out.send(p)
				default:
					drained = true
				}
			}
			var rep resumeReply
			if json.Unmarshal(b, &rep) != nil {
				return nil, nil, errorf(codeInternal, "the reply of the proxy instance running this call is unreadable")
			}
			var in *inputRequired
			if rep.Input != nil {
				in = &inputRequired{result: rep.Input}
			}
			return rep.Result, in, rep.Error
		case <-ctx.Done():
			_ = c.bus.Send(context.WithoutCancel(ctx), holder, store.Message{Kind: msgCancel, Corr: corr})
			return nil, nil, errorf(codeServerError, "request cancelled")
		case <-t.C:
			alive, err := c.bus.Alive(ctx, holder)
			if errors.Is(err, store.ErrUnavailable) {
				return nil, nil, storeError(err) // its reply could not come either
			}
			if err == nil && !alive {
				return nil, nil, errorf(codeServerError, "the proxy instance running this call stopped before it answered; "+
					"the call's outcome is unknown and it was not sent again: call the tool again")
			}
		}
	}
}

// receive handles one message of this replica's inbox (on the inbox's
// goroutine: nothing here waits).
func (c *crossReplica) receive(m store.Message) {
	switch m.Kind {
	case msgNotify:
		if s := c.session(m.Target); s != nil {
			s.notify.sendLocal(m.Body)
		}
	case msgAnswer:
		s := c.session(m.Target)
		if s == nil {
			return
		}
		if msg, err := parseMessage(m.Body); err == nil && msg.Kind == rawjson.KindResponse {
			s.asks.deliver(msg)
		}
	case msgResume:
		go c.runResume(m)
	case msgReply, msgProgress:
		c.mu.Lock()
		fw := c.waits[m.Corr]
		c.mu.Unlock()
		if fw == nil {
			return
		}
		ch := fw.reply
		if m.Kind == msgProgress {
			ch = fw.progress
		}
		select {
		case ch <- m.Body:
		default:
		}
	case msgCancel:
		c.mu.Lock()
		cancel := c.running[m.Corr]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
}

// runResume runs a retry another replica forwarded, for a call parked
// here, and sends the round's outcome back.
func (c *crossReplica) runResume(m store.Message) {
	var req resumeRequest
	if json.Unmarshal(m.Body, &req) != nil || m.Corr == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.mu.Lock()
	c.running[m.Corr] = cancel
	c.mu.Unlock()
	defer deleteLocked(&c.mu, c.running, m.Corr)
	params := json.RawMessage(`{}`)
	if req.Responses != nil {
		params, _ = rawjson.Set(params, "inputResponses", req.Responses)
	}
	r := &request{params: params, meta: req.Meta, out: corrStream{c: c, to: m.From, corr: m.Corr}, modern: true}
	res, in, werr := c.relay.resumeHere(ctx, r, req.State)
	rep := resumeReply{Result: res, Error: werr}
	if in != nil {
		rep.Input = in.result
	}
	body, _ := json.Marshal(rep)
	if err := c.bus.Send(context.Background(), m.From, store.Message{Kind: msgReply, Corr: m.Corr, Body: body}); err != nil {
		c.log.Warn().Str("error", sanitize.Error(err.Error())).Msg("the outcome of a forwarded retry could not be sent back")
	}
}

// corrStream is the stream of a retry run here for another replica: what
// is written to it (the call's progress) goes back to that replica, in
// order, ahead of the round's outcome.
type corrStream struct {
	c        *crossReplica
	to, corr string
}

func (s corrStream) send(msg []byte) error {
	return s.c.bus.Send(context.Background(), s.to, store.Message{Kind: msgProgress, Corr: s.corr, Body: msg})
}

// close stops the inbox.
func (c *crossReplica) close() {
	if c != nil {
		c.bus.Close()
	}
}
