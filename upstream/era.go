package upstream

import (
	"errors"
	"sync"
)

// errExitedOnDiscover: a stdio child exited on the server/discover probe,
// as a server may on a request it does not know. connect respawns it once
// for initialize, and that is not a failed attempt.
var errExitedOnDiscover = errors.New("the server exited on server/discover")

// eraMemo is what the handshakes learned of a server's protocol era: the
// stateless 2026-07-28 core (modern, at version) or the initialize
// handshake. It is kept across reconnects, so a server is not asked what it
// answered before; it changes only when the server's answer does. Safe for
// concurrent use.
type eraMemo struct {
	mu sync.Mutex
	e  era
}

// era is one state of an eraMemo; known is false until a handshake
// succeeded.
type era struct {
	known   bool
	modern  bool
	version string
}

func (m *eraMemo) load() era {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e
}

func (m *eraMemo) store(modern bool, version string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.e = era{known: true, modern: modern, version: version}
}
