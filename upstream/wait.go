package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Waiting for a connection (docs/operations.md#reconnection, reconnect_wait; issue 12 item 15). A
// request that finds no live session is not refused at once when the server
// is about to be there:
//
//   - during its first connection, until that attempt connects or fails, at
//     most until Options.StartupDeadline;
//   - within reconnect_wait of a dropped connection (the window, which is
//     fixed at the drop: failed attempts within it do not extend it), until
//     a reconnection, at most until the window closes.
//
// Either way at most until the request's own deadline, which Request sets
// from the server's timeout at the request's arrival. The request is then
// sent once the server is back: it was never sent before, so this is no
// replay. Everything else (a parked server, one that needs authorization, a
// failed first connection, a closed Conn, past the window) is refused at
// once with a *DownError that says why and when the next attempt starts.
//
// At most maxWaiting requests wait per server; beyond that they are refused
// at once as if no wait applied. Waiters are woken in arrival order on every
// published snapshot and look again.

// maxWaiting bounds the requests waiting for one server's connection: a
// host that keeps calling a server that does not come back cannot pile up
// goroutines and memory without limit.
const maxWaiting = 1000

// Outcomes of a request that waited for a connection (Options.OnWait, the
// outcome label of mcp_proxy_requests_waited_total).
const (
	// WaitSent: the server came back and the request was sent.
	WaitSent = "sent"
	// WaitTimeout: the wait ran out first: the reconnect window closed, the
	// startup deadline passed, or the request's own deadline did.
	WaitTimeout = "timeout"
	// WaitCanceled: the request's context was canceled (the client gave up
	// or went away).
	WaitCanceled = "canceled"
	// WaitOverflow: maxWaiting requests were waiting already; this one was
	// refused at once.
	WaitOverflow = "overflow"
	// WaitFailed: the server went down for good while the request waited
	// (its first connection failed, it was parked or closed).
	WaitFailed = "failed"
)

// waitQueue holds the requests waiting for one Conn's connection, in
// arrival order. Safe for concurrent use.
type waitQueue struct {
	n          atomic.Int32 // len, readable without mu
	mu         sync.Mutex
	head, tail *waiter
}

// waiter is one waiting request. wake holds at most one pending "look
// again".
type waiter struct {
	prev, next *waiter
	wake       chan struct{}
}

// join adds a waiter at the end of the queue; it reports false when
// maxWaiting are waiting already.
func (q *waitQueue) join() (*waiter, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n.Load() >= maxWaiting {
		return nil, false
	}
	w := &waiter{wake: make(chan struct{}, 1), prev: q.tail}
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n.Add(1)
	return w, true
}

// leave removes w from the queue.
func (q *waitQueue) leave(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	q.n.Add(-1)
}

// wakeAll tells every waiter, first to last, to look again. It never
// blocks, and costs one atomic load when nobody waits.
func (q *waitQueue) wakeAll() {
	if q.n.Load() == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for w := q.head; w != nil; w = w.next {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// waiting returns how many requests wait.
func (q *waitQueue) waiting() int { return int(q.n.Load()) }

// waitUntil says whether a request that arrived at arrived and finds no live
// session may wait, given snap, and until when (before its own deadline).
func (c *Conn) waitUntil(snap *Snapshot, arrived time.Time) (time.Time, bool) {
	now := time.Now()
	switch {
	case snap.State == StateConnected:
		// The session died a moment ago and the supervisor has not said
		// so yet: the drop opens a window.
		if rw := c.reconnectWait(); rw > 0 {
			return arrived.Add(rw), true
		}
	case !snap.StartupUntil.IsZero():
		return snap.StartupUntil, now.Before(snap.StartupUntil)
	case !snap.ReconnectUntil.IsZero():
		return snap.ReconnectUntil, now.Before(snap.ReconnectUntil)
	}
	return time.Time{}, false
}

// awaitSession waits for a live session for a request that arrived at
// arrived and found none (see the top of this file). It returns the session
// with the request registered on it (end it with end), or the error to
// return: a *DownError (matching ErrNotConnected) when the request may not
// wait or its wait ran out, ctx's error when ctx ended first.
func (c *Conn) awaitSession(ctx context.Context, method string, arrived time.Time) (*session, error) {
	snap := c.Snapshot()
	until, ok := c.waitUntil(snap, arrived)
	if !ok {
		return nil, c.opError(method, snap.downError())
	}
	w, ok := c.waits.join()
	if !ok {
		c.waited(WaitOverflow, 0)
		return nil, c.opError(method, snap.downError().overflow())
	}
	defer c.waits.leave(w)
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for {
		// Looked at after joining: a connection published in between has
		// woken w already, so none is missed.
		if s := c.acquire(); s != nil {
			c.waited(WaitSent, time.Since(arrived))
			return s, nil
		}
		snap = c.Snapshot()
		next, ok := c.waitUntil(snap, arrived)
		if !ok {
			outcome := WaitFailed
			if !time.Now().Before(until) {
				outcome = WaitTimeout
			}
			c.waited(outcome, time.Since(arrived))
			return nil, c.opError(method, snap.downError().after(time.Since(arrived)))
		}
		if !next.Equal(until) {
			until = next
			timer.Reset(time.Until(until))
		}
		select {
		case <-w.wake:
		case <-timer.C:
			c.waited(WaitTimeout, time.Since(arrived))
			return nil, c.opError(method, c.Snapshot().downError().after(time.Since(arrived)))
		case <-ctx.Done():
			outcome := WaitCanceled
			if ctx.Err() == context.DeadlineExceeded {
				outcome = WaitTimeout
			}
			c.waited(outcome, time.Since(arrived))
			return nil, c.opError(method, ctx.Err())
		}
	}
}

// waited reports the end of one wait to Options.OnWait.
func (c *Conn) waited(outcome string, d time.Duration) {
	if c.opts.OnWait != nil {
		c.opts.OnWait(outcome, d)
	}
}

// reconnectWait is the server's reconnect_wait; 0 turns the window off.
func (c *Conn) reconnectWait() time.Duration {
	return max(c.cfg.ReconnectWaitValue(), 0)
}
