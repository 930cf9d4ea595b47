package downstream

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// maxTerminated bounds the memory of ended session ids, kept so that a
// client reusing one gets "terminated" rather than "unknown".
const maxTerminated = 10000

var errUnknownSession = errors.New("unknown session")

// sessionRegistry issues and checks Mcp-Session-Id values. Unlike mcp-go's
// default manager it knows which ids it issued, so a stale id (after a
// restart, or from another replica) gets 404 and the client re-initializes.
type sessionRegistry struct {
	mu         sync.Mutex
	live       map[string]bool
	terminated map[string]bool
	order      []string // terminated ids, oldest first
}

func newSessionRegistry() *sessionRegistry {
	return &sessionRegistry{live: map[string]bool{}, terminated: map[string]bool{}}
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver.
func (s *sessionRegistry) ResolveSessionIdManager(*http.Request) server.SessionIdManager { return s }

// Generate implements server.SessionIdManager.
func (s *sessionRegistry) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	id := "mcp-proxy-" + hex.EncodeToString(b[:])
	s.mu.Lock()
	s.live[id] = true
	s.mu.Unlock()
	return id
}

// Validate implements server.SessionIdManager.
func (s *sessionRegistry) Validate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.live[id]:
		return false, nil
	case s.terminated[id]:
		return true, nil
	}
	return false, errUnknownSession
}

// Terminate implements server.SessionIdManager.
func (s *sessionRegistry) Terminate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live[id] {
		return false, nil
	}
	delete(s.live, id)
	s.terminated[id] = true
	s.order = append(s.order, id)
	if len(s.order) > maxTerminated {
		delete(s.terminated, s.order[0])
		s.order = s.order[1:]
	}
	return false, nil
}
