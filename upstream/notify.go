package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// notificationQueue is how many upstream notifications may wait for
// OnNotification; beyond it they are dropped with a warning, because the
// transport's read loop (which also carries responses) must never block.
const notificationQueue = 1024

// noteQueue is the FIFO of notifications waiting for OnNotification, at
// most notificationQueue long. Its storage grows with a burst and is let go
// when the queue runs empty: most sessions never queue a notification, and
// a fixed buffer of notificationQueue entries cost every upstream 48 KiB.
// A goroutine delivers only while notifications wait: push reports when
// none runs (the caller starts one), and pop reports empty to it once, as
// it ends. The zero value is an empty queue.
type noteQueue struct {
	mu         sync.Mutex
	items      []note // items[head:] are waiting
	head       int
	delivering bool // a delivery goroutine owns the queue's front
}

// note is one notification waiting for OnNotification, with its params as
// the server wrote them (nil when it had none).
type note struct {
	method string
	params json.RawMessage
}

// keepNotes is the storage (in entries) an empty queue may keep for the
// next burst.
const keepNotes = 16

// push appends n and reports whether it did, whether it dropped a waiting
// notification to make room, and whether the caller is to start a
// delivery goroutine (none runs). A full queue refuses n, except a
// progress notification whose token has one waiting: the older of the two
// goes (progress reports where a call stands, so the newest one matters,
// and a call's last progress must not be the one lost). It never blocks.
func (q *noteQueue) push(n note) (added, displaced, start bool) {
	q.mu.Lock()
	if len(q.items)-q.head >= notificationQueue {
		i := q.sameProgress(n)
		if i < 0 {
			q.mu.Unlock()
			return false, false, false
		}
		copy(q.items[i:], q.items[i+1:])
		q.items[len(q.items)-1] = note{}
		q.items = q.items[:len(q.items)-1]
		displaced = true
	}
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Move the waiting entries to the front instead of growing.
		q.items = q.items[:copy(q.items, q.items[q.head:])]
		clear(q.items[len(q.items) : len(q.items)+q.head])
		q.head = 0
	}
	q.items = append(q.items, n)
	start = !q.delivering
	q.delivering = true
	q.mu.Unlock()
	return true, displaced, start
}

// progressMethod is the method of progress notifications.
const progressMethod = "notifications/progress"

// sameProgress returns the index of the oldest waiting progress
// notification with n's progress token, or -1 (also when n is no progress
// notification). Only a full queue looks.
func (q *noteQueue) sameProgress(n note) int {
	if n.method != progressMethod {
		return -1
	}
	token := progressToken(n)
	if token == "" {
		return -1
	}
	for i := q.head; i < len(q.items); i++ {
		if q.items[i].method == progressMethod && progressToken(q.items[i]) == token {
			return i
		}
	}
	return -1
}

// progressToken is the routing key of a progress notification's token
// ("" when it has none).
func progressToken(n note) string {
	v, ok, err := rawjson.Get(n.params, "progressToken")
	if err != nil || !ok {
		return ""
	}
	return rawjson.IDKey(v)
}

// pop removes the oldest notification; false when there is none, and then
// the delivery goroutine that called it is to end (the next push starts
// another).
func (q *noteQueue) pop() (note, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		q.delivering = false
		return note{}, false
	}
	n := q.items[q.head]
	q.items[q.head] = note{}
	q.head++
	if q.head == len(q.items) {
		q.head = 0
		q.items = q.items[:0]
		if cap(q.items) > keepNotes {
			q.items = nil
		}
	}
	return n, true
}

// onRawNotification takes a notification of the server, as its bytes, on
// the wire's reader: it only hands off. list_changed notifications mark
// their kind for re-discovery (coalesced); the rest go to the
// OnNotification queue, and their params reach OnNotification as they came.
// notificationSubscriptionsAcknowledged opens a subscriptions/listen stream
// (MCP 2026-07-28).
const notificationSubscriptionsAcknowledged = "notifications/subscriptions/acknowledged"

func (s *session) onRawNotification(method string, params json.RawMessage) {
	if method == notificationSubscriptionsAcknowledged {
		return // the listen stream's own (listen.go), for no client
	}
	s.enqueue(note{method: method, params: params})
}

func (s *session) enqueue(n note) {
	if k := listChangedKinds(n.method); k != 0 {
		s.refresh.request(k, true)
		return
	}
	s.queued.Add(1)
	added, displaced, start := s.notes.push(n)
	if !added || displaced {
		s.delivered.Add(1) // one dropped: counted so that barrier never waits for it
		if s.dropped.Add(1) == 1 {
			s.log.Warn().Str("method", n.method).Msg("notification queue full; dropping notifications")
		}
	}
	if start {
		// Refused once the session is closing: nothing is delivered then
		// (the queue stays marked as delivering, so no push tries again).
		s.spawn(s.deliverNotifications)
	}
}

// notificationBarrierLimit bounds how long a response waits for the
// notifications that arrived before it (a slow OnNotification).
const notificationBarrierLimit = time.Second

// barrier waits until every notification that arrived before now has been
// handed to OnNotification: a call's progress and log messages precede its
// result on the wire, and the result must not overtake them (the relay of a
// call's progress ends when the call returns).
func (s *session) barrier(ctx context.Context) {
	mark := s.queued.Load()
	if s.delivered.Load() >= mark {
		return
	}
	deadline := time.Now().Add(notificationBarrierLimit)
	for s.delivered.Load() < mark && time.Now().Before(deadline) && ctx.Err() == nil && s.ctx.Err() == nil {
		time.Sleep(200 * time.Microsecond)
	}
}

// deliverNotifications passes queued notifications to OnNotification, in
// arrival order, until the queue is empty or the session dies. It runs
// only while notifications wait (enqueue starts it), so the many sessions
// that never send one keep no goroutine for them.
func (s *session) deliverNotifications() {
	for s.ctx.Err() == nil {
		n, ok := s.notes.pop()
		if !ok {
			return
		}
		if dropped := s.dropped.Swap(0); dropped > 0 {
			s.log.Warn().Uint64("dropped", dropped).Msg("upstream notifications were dropped")
		}
		if s.c.opts.OnNotification != nil {
			s.c.notifyMu.Lock()
			s.c.opts.OnNotification(s.c.name, n.method, n.params)
			s.c.notifyMu.Unlock()
		}
		s.delivered.Add(1)
	}
}

// refresher coalesces list_changed notifications: at most one
// re-discovery runs, and everything that arrives meanwhile becomes one
// pending run.
type refresher struct {
	mu        sync.Mutex
	pending   kind
	announced kind          // the part of pending an upstream's list_changed asked for
	wake      chan struct{} // capacity 1
}

// request marks kinds for re-discovery; it never blocks. announced says
// the upstream asked for them (list_changed), rather than a stale cache
// hint.
func (r *refresher) request(k kind, announced bool) {
	r.mu.Lock()
	r.pending |= k
	if announced {
		r.announced |= k
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take returns the kinds to re-discover and which of them were announced,
// and clears both.
func (r *refresher) take() (k, announced kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, announced = r.pending, r.announced
	r.pending, r.announced = 0, 0
	return k, announced
}

// rediscover re-discovers what list_changed notifications asked for and
// publishes it if it changed. A failed re-discovery keeps the previous
// catalog and is logged; one refused for an expired HTTP session renews the
// session, whose discovery covers it, and reports false: the session's
// background work is over.
func (s *session) rediscover() bool {
	want, announced := s.refresh.take()
	if want == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.c.connectTimeout())
	cat, err := s.discover(ctx, want)
	cancel()
	if errors.Is(err, ErrSessionExpired) {
		s.expire()
		return false
	}
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("re-discovery after list_changed failed; keeping the previous list")
		}
		return true
	}
	s.log.Debug().Int("tools", len(cat.tools)).Msg("re-discovered after list_changed")
	s.c.publishCatalog(s, cat, announced)
	return true
}
