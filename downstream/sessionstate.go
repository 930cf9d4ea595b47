package downstream

import (
	"sync"
	"sync/atomic"
)

// sessionState is what a session keeps from one request to the next: what
// its client declared in initialize, the log level it set, the tools its
// searches activated (deferred loading), the tools a person approved
// "always", and the call of a stateless client that spans round trips.
// Who the session serves (its agent, per-call list and principal) is fixed
// when it starts and is not state.
//
// Each method is one read or one change of values the caller owns
// (clientInfo is a copy), so a store outside the process can implement it
// for sessions shared by replicas. The parked call is the exception: it is
// a call running in this process, and stays in it. memState is the
// in-process store.
type sessionState interface {
	// Client is what the client declared in initialize, nil before it did.
	Client() *clientInfo
	// SetClient records an initialize; first is false when one was
	// recorded before (the client started over).
	SetClient(c clientInfo) (first bool)

	// Level is the client's log level (a logLevels index), -1 when it set none.
	Level() int32
	SetLevel(level int32)

	// Activated reports whether a search activated the tool.
	Activated(tool string) bool
	// GroupActive reports whether a search made the agent's dynamic group
	// i visible.
	GroupActive(i int) bool
	// Activate records tools and groups; changed reports whether anything
	// was new.
	Activate(tools []string, groups []int) (changed bool)
	// NothingActivated reports whether no search activated anything yet.
	NothingActivated() bool

	// ApprovedAlways reports whether a person approved the tool for the
	// rest of the session.
	ApprovedAlways(tool string) bool
	ApproveAlways(tool string)

	// Parked is the call of a stateless request that may span round trips
	// (roundtrip.go), nil when none.
	Parked() *parkedCall
	Park(pc *parkedCall)
}

// memState is the session state of one process: today's behaviour.
type memState struct {
	client   atomic.Pointer[clientInfo]
	level    atomic.Int32
	deferred deferredState
	always   toolSet
	parked   atomic.Pointer[parkedCall]
}

func newMemState() *memState {
	m := &memState{}
	m.level.Store(-1)
	return m
}

func (m *memState) Client() *clientInfo { return m.client.Load() }

func (m *memState) SetClient(c clientInfo) bool { return m.client.Swap(&c) == nil }

func (m *memState) Level() int32 { return m.level.Load() }

func (m *memState) SetLevel(level int32) { m.level.Store(level) }

func (m *memState) Activated(tool string) bool { return m.deferred.isActivated(tool) }

func (m *memState) GroupActive(i int) bool { return m.deferred.groupActive(i) }

func (m *memState) Activate(tools []string, groups []int) bool {
	newTools, newGroups := m.deferred.activate(tools, groups)
	return len(newTools) > 0 || len(newGroups) > 0
}

func (m *memState) NothingActivated() bool { return m.deferred.empty() }

func (m *memState) ApprovedAlways(tool string) bool { return m.always.has(tool) }

func (m *memState) ApproveAlways(tool string) { m.always.add(tool) }

func (m *memState) Parked() *parkedCall { return m.parked.Load() }

func (m *memState) Park(pc *parkedCall) { m.parked.Store(pc) }

// toolSet is a set of tool names (those a session approved for always),
// safe for concurrent use. The zero value is empty.
type toolSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func (t *toolSet) has(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.names[name]
}

func (t *toolSet) add(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.names == nil {
		t.names = map[string]bool{}
	}
	t.names[name] = true
}

// reset replaces the set with names, which t keeps.
func (t *toolSet) reset(names map[string]bool) {
	t.mu.Lock()
	t.names = names
	t.mu.Unlock()
}

// deferredState is a session's deferred-loading state: the tools its
// searches activated and the dynamic groups its queries made visible.
type deferredState struct {
	mu        sync.Mutex
	activated map[string]bool
	groups    map[int]bool
}

func (d *deferredState) isActivated(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.activated[name]
}

func (d *deferredState) groupActive(i int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.groups[i]
}

// activate records names and groups and returns those that were new.
func (d *deferredState) activate(names []string, groups []int) (newNames []string, newGroups []int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.activated == nil {
		d.activated, d.groups = map[string]bool{}, map[int]bool{}
	}
	for _, n := range names {
		if !d.activated[n] {
			d.activated[n] = true
			newNames = append(newNames, n)
		}
	}
	for _, g := range groups {
		if !d.groups[g] {
			d.groups[g] = true
			newGroups = append(newGroups, g)
		}
	}
	return newNames, newGroups
}

// reset replaces what is recorded with activated and groups, which d keeps.
func (d *deferredState) reset(activated map[string]bool, groups map[int]bool) {
	d.mu.Lock()
	d.activated, d.groups = activated, groups
	d.mu.Unlock()
}

// empty reports whether the session has activated nothing yet, so that it
// can share the agent's cached view.
func (d *deferredState) empty() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.activated) == 0 && len(d.groups) == 0
}
