package store

import (
	"sync"
	"time"
)

// sessionCache is a replica's copy of the sessions it reads
// (docs/shared-state.md#the-replicas-copy-of-sessions), so that a request
// on a session whose copy is current costs no round trip to Redis. It is
// also where the Redis key of each session id in use is kept (computing
// an HMAC on every request costs a few microseconds of CPU).
//
// The copy of a session is dropped when another write to it is announced
// (every write of a session publishes its key in the same atomic step,
// and watch delivers it here), and all copies are dropped whenever the
// subscription that carries the announcements fails, is made again, or
// stops answering its pings: a copy is served only while every
// announcement made up to a second ago is known to have arrived. A read
// that began before an announcement it raced with keeps nothing (begin,
// fill). A copy is also never served past the time Redis expires the
// session (the expiry the read found, or a refresh set).
//
// Its methods are safe for concurrent use.
type sessionCache struct {
	mu sync.Mutex
	// byID and byKey hold the same entries: by session id (the requests'
	// way in) and by Redis key (the announcements').
	byID  map[string]*cachedSession
	byKey map[string]*cachedSession
	// gen is raised by every announcement and every drop of all copies;
	// dropped is its value at the last such drop.
	gen, dropped uint64
	// health is the announcements' subscription's (watch.go).
	subscribed bool
	// acked is when (since base) the last ping answered on the current
	// subscription was sent: every announcement published before then has
	// arrived. 0: none answered yet.
	acked   time.Duration
	base    time.Time
	ackedCh chan struct{} // closed and replaced at each answered ping

	// afterRead, when set (tests), runs after a read of session id in
	// Redis and before its result is kept.
	afterRead func(id string)
}

// cachedSession is one session id this replica has found in Redis.
type cachedSession struct {
	id, key string
	// fields is the copy of the session's hash; nil when there is none
	// (only the key is known).
	fields map[string]string
	// expires is when Redis drops the session at the latest, as far as
	// this replica knows; zero: no expiry.
	expires time.Time
	// inval is the cache's gen when this copy was last dropped.
	inval uint64
	// refreshing is set while a refresh of the expiry is on its way.
	refreshing bool
}

// maxCachedSessions bounds the sessions a replica keeps a copy (or only
// the key) of; when it is full, one entry makes room for the next, so
// more sessions than this in use keep most of their entries rather than
// the whole map being dropped every maxCachedSessions misses.
const maxCachedSessions = 4096

// Health of the announcements' subscription: it is pinged every
// pingInterval, and the copies are served only while a ping sent less
// than maxAckAge ago was answered (and so every announcement published
// before it arrived).
const (
	pingInterval = 250 * time.Millisecond
	maxAckAge    = time.Second
)

func newSessionCache() *sessionCache {
	return &sessionCache{byID: map[string]*cachedSession{}, byKey: map[string]*cachedSession{},
		base: time.Now(), ackedCh: make(chan struct{})}
}

// since is the time since c.base, on the monotonic clock.
func (c *sessionCache) since() time.Duration { return time.Since(c.base) }

// keyOf is the Redis key kept for session id, "" when none is.
func (c *sessionCache) keyOf(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byID[id]; e != nil {
		return e.key
	}
	return ""
}

// current reports whether the copies may be served. c.mu must be held.
func (c *sessionCache) current() bool {
	return c.subscribed && c.acked > 0 && c.since()-c.acked < maxAckAge
}

// get returns the copy of session id when it is current; refresh is true
// when less than idle is left before it expires (idle > 0) and no refresh
// is on its way: the caller refreshes it (and then calls refreshed).
func (c *sessionCache) get(id string, idle time.Duration) (fields map[string]string, key string, refresh bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byID[id]
	if e == nil || e.fields == nil || !c.current() {
		return nil, "", false
	}
	if !e.expires.IsZero() {
		left := e.expires.Sub(now)
		if left <= 0 {
			return nil, "", false
		}
		if idle > 0 && left < idle && !e.refreshing {
			e.refreshing, refresh = true, true
		}
	}
	return e.fields, e.key, refresh
}

// readTicket is what a read of a session in Redis took from the cache
// before it was sent: fill keeps its result only when nothing that
// concerns it happened meanwhile.
type readTicket struct {
	e   *cachedSession // the session's entry then; nil: none
	gen uint64
}

// begin is to be called before a read of session id is sent to Redis.
func (c *sessionCache) begin(id string) readTicket {
	c.mu.Lock()
	defer c.mu.Unlock()
	return readTicket{e: c.byID[id], gen: c.gen}
}

// fill records what a read of session id under key found: fields (empty:
// no such session, whose entry goes) and the expiry it found (zero:
// none). The copy is kept only when the subscription is current and no
// drop happened since the read began (t), nor an announcement of this
// session, nor (for a session without an entry then) any announcement at
// all: a read that may have missed a write keeps no copy. The key is kept
// all the same.
func (c *sessionCache) fill(t readTicket, id, key string, fields map[string]string, expires time.Time) {
	if c.afterRead != nil {
		c.afterRead(id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(fields) == 0 {
		c.remove(c.byID[id])
		return
	}
	e := c.byID[id]
	if e == nil {
		e = c.add(id, key)
	}
	keep := c.current() && c.dropped <= t.gen
	if t.e == nil {
		keep = keep && c.gen == t.gen
	} else {
		keep = keep && t.e == e && e.inval <= t.gen
	}
	if keep {
		e.fields, e.expires = fields, expires
	}
}

// remember keeps key as the key of session id, with no copy (a session
// just made: its own announcement would drop a copy anyway).
func (c *sessionCache) remember(id, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID[id] == nil {
		c.add(id, key)
	}
}

// add makes the entry of session id, making room for it. c.mu must be
// held.
func (c *sessionCache) add(id, key string) *cachedSession {
	if len(c.byID) >= maxCachedSessions {
		for _, other := range c.byID { // one entry out, the runtime's pick
			c.remove(other)
			break
		}
	}
	e := &cachedSession{id: id, key: key, inval: c.gen}
	c.byID[id] = e
	c.byKey[key] = e
	return e
}

// remove forgets e (nil: nothing). c.mu must be held.
func (c *sessionCache) remove(e *cachedSession) {
	if e == nil {
		return
	}
	delete(c.byID, e.id)
	if c.byKey[e.key] == e {
		delete(c.byKey, e.key)
	}
}

// forget removes session id's entry (the session was deleted here).
func (c *sessionCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e := c.byID[id]; e != nil {
		e.inval = c.gen
		c.remove(e)
	}
}

// invalidate drops the copy of the session under key: a write to it was
// announced, or made here.
func (c *sessionCache) invalidate(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e := c.byKey[key]; e != nil {
		e.fields, e.inval = nil, c.gen
	}
}

// refreshed records the outcome of a refresh of the expiry of session
// id's copy: ok, it now expires at expires; !ok, Redis has no such key
// (the copy goes) or did not answer (a later use tries again).
func (c *sessionCache) refreshed(id string, found bool, expires time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byID[id]
	if e == nil {
		return
	}
	e.refreshing = false
	switch {
	case err != nil:
	case !found:
		c.gen++
		e.fields, e.inval = nil, c.gen
	case e.fields != nil:
		e.expires = expires
	}
}

// dropAll drops every copy (the keys stay). c.mu must be held.
func (c *sessionCache) dropAll() {
	c.gen++
	c.dropped = c.gen
	for _, e := range c.byID {
		e.fields, e.inval = nil, c.gen
	}
}

// lost records that the subscription failed or is being made again:
// announcements may be lost, so every copy goes, and none is served
// until the subscription is back and answers a ping.
func (c *sessionCache) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subscribed, c.acked = false, 0
	c.dropAll()
}

// subscribedNow records that the subscription is in place: what was
// announced before it may have been missed, so every copy goes (again).
func (c *sessionCache) subscribedNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subscribed, c.acked = true, 0
	c.dropAll()
}

// pong records the answer to a ping sent at sent (since base).
func (c *sessionCache) pong(sent time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.subscribed || sent <= c.acked {
		return
	}
	c.acked = sent
	close(c.ackedCh)
	c.ackedCh = make(chan struct{})
}

// ackedSince returns whether a ping sent at or after t was answered, and
// else a channel closed at the next answer.
func (c *sessionCache) ackedSince(t time.Duration) (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subscribed && c.acked >= t, c.ackedCh
}
