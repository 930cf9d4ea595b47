package downstream

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// sessionTable holds the live sessions: the stdio session and every HTTP
// session. It issues HTTP session ids, binds each to the agent whose
// endpoint created it, closes the ones idle too long, and keeps the
// sessions_active gauge. Its methods are safe for concurrent use.
type sessionTable struct {
	metrics *metrics.Metrics
	// onRemove runs once for every session that ends (its subscriptions
	// go); nil: nothing.
	onRemove func(*session)

	mu   sync.Mutex
	all  map[*session]struct{}
	byID map[string]*session // HTTP sessions, by Mcp-Session-Id
	// listeners are the sessions of stateless clients' subscriptions/listen
	// requests: they take broadcasts but are not sessions of their own.
	listeners map[*session]struct{}

	// shared keeps HTTP sessions in a Redis store (docs/shared-state.md),
	// nil with the memory store. With it, byID holds the sessions this
	// replica has served: acquire reads each session from the store (one
	// round trip), makes a local one for a session another replica made,
	// and drops a local one the store no longer has.
	shared *sharedSessions
	// cross wires HTTP sessions to the other replicas of a Redis store
	// (crossreplica.go); nil with the memory store.
	cross *crossReplica
	// prepay is what a tools/call of a tool on a session would take in the
	// store, to take it with the session's read (prepaid.go); nil: nothing.
	prepay func(s *session, tool string) *prepaid
	// relevel runs, before the request goes on, when a session read from
	// the store brings a log level this replica's upstreams were not told
	// (set on another replica: loglevel.go); nil: nothing.
	relevel func(ctx context.Context)
	// levelWaiting, when set (tests), runs as a request starts to wait for
	// the re-level another request of its session started.
	levelWaiting func()
}

// sharedSessions is what the table needs for sessions in a store.
type sharedSessions struct {
	store *store.Sessions
	// resolve finds the agent a stored session serves.
	resolve func(name string) (*filter.Agent, error)
	log     zerolog.Logger
}

func newSessionTable(m *metrics.Metrics) *sessionTable {
	return &sessionTable{metrics: m, all: map[*session]struct{}{}, byID: map[string]*session{}, listeners: map[*session]struct{}{}}
}

// newID returns a fresh, unguessable HTTP session id.
func newID() string {
	return "mcp-proxy-" + randid.Hex(16)
}

// add registers a started session.
func (st *sessionTable) add(s *session) {
	st.mu.Lock()
	st.all[s] = struct{}{}
	if s.id != "" && s.transport == transportHTTP {
		st.byID[s.id] = s
	}
	st.mu.Unlock()
	st.cross.adopt(s)
	st.metrics.SessionOpened(s.agent.Name, s.transport)
}

// remove ends s and forgets it; a second call does nothing.
func (st *sessionTable) remove(s *session) {
	st.mu.Lock()
	live := st.unlink(s)
	st.mu.Unlock()
	st.ended(s, live)
}

// unlink forgets s and reports whether it was live. st.mu must be held:
// from then on neither lookup nor acquire finds it.
func (st *sessionTable) unlink(s *session) bool {
	_, live := st.all[s]
	delete(st.all, s)
	if st.byID[s.id] == s {
		delete(st.byID, s.id)
	}
	return live
}

// ended closes an unlinked session and, when it was live, counts it gone
// and runs onRemove. st.mu must not be held.
func (st *sessionTable) ended(s *session, live bool) {
	s.close()
	st.cross.forget(s)
	if live {
		st.metrics.SessionClosed(s.agent.Name, s.transport)
		if st.onRemove != nil {
			st.onRemove(s)
		}
	}
}

// create records a new HTTP session s in the store (nothing with the
// memory store) and gives it its shared state; s is not yet in the table.
func (st *sessionTable) create(ctx context.Context, s *session) error {
	if st.shared == nil {
		return nil
	}
	s.state = newSharedState(s.id, st.shared.store, st.shared.log)
	return st.shared.store.Create(ctx, s.id, sessionFields(s))
}

// lookup returns the HTTP session id of client c, or nil: an id that was
// never issued, has ended, or belongs to another agent's endpoint or
// another user of it (another token subject or static token) is unknown
// there (docs/agents.md#over-http).
func (st *sessionTable) lookup(c client, id string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.find(c, id)
}

// acquire is lookup that also begins a request or stream on the session
// it finds (the caller ends it with s.activity.end()). Finding and
// beginning are one step against closeIdle, which decides and unlinks
// under the same lock: the sweep never closes a session a request has
// begun on, and a request never begins on a session the sweep closed (it
// finds none, like any unknown id).
//
// With a store, the session is read from it first: its error is the
// store's (it did not answer). tool, when not "", is the tool a tools/call
// on the session calls: with a store, its rate limits are taken with the
// read (prepaid.go), and the prepaid is returned for the call (nil: none);
// the caller gives it back when the request ends.
func (st *sessionTable) acquire(ctx context.Context, c client, id, tool string) (*session, *prepaid, error) {
	if st.shared != nil {
		return st.acquireShared(ctx, c, id, tool)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.find(c, id)
	if s != nil {
		s.activity.begin()
	}
	return s, nil, nil
}

// prepays reports whether acquire takes a tools/call's rate limits with
// the session's read (a store, and limits to take): only then does it need
// the tool, which the caller otherwise need not read from the call.
func (st *sessionTable) prepays() bool { return st.shared != nil && st.prepay != nil }

// acquireShared is acquire with the sessions in the store.
func (st *sessionTable) acquireShared(ctx context.Context, c client, id, tool string) (*session, *prepaid, error) {
	var pre *prepaid
	if tool != "" && st.prepay != nil {
		st.mu.Lock()
		local := st.find(c, id)
		st.mu.Unlock()
		if local != nil {
			pre = st.prepay(local, tool)
		}
	}
	var got store.Session
	var err error
	if pre != nil {
		got, pre.took, err = st.shared.store.LoadTaking(ctx, id, pre.buckets, pre.slot)
	} else {
		got, err = st.shared.store.Load(ctx, id)
	}
	if err != nil {
		return nil, nil, err
	}
	fields, ok := got.Fields, got.Found()
	var made, gone *session
	relevel := false
	var levelSent, levelWait chan struct{}
	st.mu.Lock()
	s := st.byID[id]
	switch {
	case !ok:
		// Ended on another replica, or expired: forget it here too.
		if s != nil && st.unlink(s) {
			gone = s
		}
		s = nil
	case !servesClient(fields, c):
		s = nil
	case s == nil:
		if s = st.fromStore(id, got, c); s != nil {
			st.cross.adopt(s) // before any request finds it
			st.all[s], st.byID[id] = struct{}{}, s
			made = s
		}
	}
	if s != nil {
		sh := s.state.(*sharedState)
		// A level set or changed on another replica: this replica's
		// upstreams are told it before the request goes on.
		relevel = sh.load(got) || (made != nil && sh.Level() >= 0)
		switch {
		case relevel:
			// The session's other requests on this replica wait for it
			// too: they read the store after this one and see no change.
			levelSent = make(chan struct{})
			sh.levelPending = levelSent
		case sh.levelPending != nil:
			levelWait = sh.levelPending
		}
		s.activity.begin()
	}
	st.mu.Unlock()
	if s != nil && s.state.(*sharedState).initializedNow(ctx) {
		// The client's notifications/initialized may have reached
		// another replica: the questions waiting for it go now.
		s.markInitialized()
	}
	if pre != nil && (s == nil || s != pre.sess) {
		// Not the session the limits were taken for (it is gone, or
		// serves someone else): what was taken goes back before the
		// request is answered, and a call on it takes its own.
		pre.giveBack(ctx)
		pre = nil
	}
	if gone != nil {
		st.ended(gone, true)
	}
	if made != nil {
		st.metrics.SessionOpened(made.agent.Name, made.transport)
	}
	if relevel {
		if st.relevel != nil {
			st.relevel(ctx)
		}
		st.mu.Lock()
		if sh := s.state.(*sharedState); sh.levelPending == levelSent {
			sh.levelPending = nil
		}
		st.mu.Unlock()
		close(levelSent)
	}
	if levelWait != nil {
		if st.levelWaiting != nil {
			st.levelWaiting()
		}
		t := time.NewTimer(levelSendTimeout)
		select {
		case <-levelWait:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return s, pre, nil
}

// fromStore makes the local session of a session another replica made:
// the same agent, user, per-call list and state, nothing to initialize
// again. nil when its agent is gone (a reload removed it).
func (st *sessionTable) fromStore(id string, got store.Session, c client) *session {
	a, err := st.shared.resolve(got.Fields[fieldAgent])
	if err != nil {
		return nil
	}
	s := newSession(id, transportHTTP, a, perCallOf(got.Fields))
	s.principal = c.principal
	state := newSharedState(id, st.shared.store, st.shared.log)
	state.load(got)
	s.state = state
	if state.Client() != nil {
		s.open.Store(true)
	}
	if state.wasInitialized() {
		s.markInitialized()
	}
	return s
}

// end ends client c's session id (DELETE): on every replica with a store.
// found is false for an unknown id; the error is the store's.
func (st *sessionTable) end(ctx context.Context, c client, id string) (found bool, err error) {
	if st.shared == nil {
		s := st.lookup(c, id)
		if s != nil {
			st.remove(s)
		}
		return s != nil, nil
	}
	got, err := st.shared.store.Reload(ctx, id)
	if err != nil || !got.Found() || !servesClient(got.Fields, c) {
		return false, err
	}
	if err := st.shared.store.Delete(ctx, id); err != nil {
		return false, err
	}
	st.mu.Lock()
	s := st.byID[id]
	st.mu.Unlock()
	if s != nil {
		st.remove(s)
	}
	return true, nil
}

// find is lookup with st.mu held.
func (st *sessionTable) find(c client, id string) *session {
	s := st.byID[id]
	if s == nil || s.agent.Name != c.agent || s.principal != c.principal {
		return nil
	}
	return s
}

// addListener registers a listen's session; removeListener forgets it and
// drops what it subscribed to.
func (st *sessionTable) addListener(s *session) {
	st.mu.Lock()
	st.listeners[s] = struct{}{}
	st.mu.Unlock()
}

func (st *sessionTable) removeListener(s *session) {
	st.mu.Lock()
	delete(st.listeners, s)
	st.mu.Unlock()
	if st.onRemove != nil {
		st.onRemove(s)
	}
}

// each calls fn for every live session and listener; fn must not call the
// store.
func (st *sessionTable) each(fn func(*session)) {
	st.mu.Lock()
	list := make([]*session, 0, len(st.all)+len(st.listeners))
	for s := range st.all {
		list = append(list, s)
	}
	for s := range st.listeners {
		list = append(list, s)
	}
	st.mu.Unlock()
	for _, s := range list {
		fn(s)
	}
}

// closeIdle ends the HTTP sessions with nothing open and no activity for
// idle, and returns how many it closed. Each is found idle and unlinked in
// one step under st.mu (see acquire).
func (st *sessionTable) closeIdle(idle time.Duration) int {
	cutoff := time.Now().Add(-idle)
	var gone []*session
	st.mu.Lock()
	for _, s := range st.byID {
		if s.activity.idleSince(cutoff) {
			st.unlink(s)
			gone = append(gone, s)
		}
	}
	st.mu.Unlock()
	for _, s := range gone {
		st.ended(s, true)
	}
	return len(gone)
}

// closeHTTP ends every HTTP session (shutdown).
func (st *sessionTable) closeHTTP() {
	st.mu.Lock()
	list := make([]*session, 0, len(st.byID))
	for _, s := range st.byID {
		list = append(list, s)
	}
	st.mu.Unlock()
	for _, s := range list {
		st.remove(s)
	}
}

// broadcast sends a notification to every initialized session on its own
// stream (stdio, or the HTTP session's GET stream). keep, when not nil,
// picks the sessions.
func (st *sessionTable) broadcast(method string, params []byte, keep func(*session) bool) {
	msg := notification(method, params)
	st.each(func(s *session) {
		if !s.open.Load() || keep != nil && !keep(s) {
			return
		}
		s.sendUnownedHere(msg) // every replica tells the streams it holds
	})
}
