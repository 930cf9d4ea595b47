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
// Each id is bound to the agent whose endpoint issued it: it is unknown on
// another agent's endpoint.
type sessionRegistry struct {
	mu         sync.Mutex
	live       map[string]string // id -> agent
	terminated map[string]bool
	order      []string // terminated ids, oldest first
}

func newSessionRegistry() *sessionRegistry {
	return &sessionRegistry{live: map[string]string{}, terminated: map[string]bool{}}
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the
// manager of the agent the request was routed to. mcp-go's idle sweeper
// passes a nil request and gets the registry itself.
func (s *sessionRegistry) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r == nil {
		return s
	}
	return agentSessions{reg: s, agent: agentFrom(r.Context())}
}

// agentSessions is the registry as one agent's endpoint sees it.
type agentSessions struct {
	reg   *sessionRegistry
	agent string
}

func (a agentSessions) Generate() string { return a.reg.generate(a.agent) }

func (a agentSessions) Validate(id string) (bool, error) {
	a.reg.mu.Lock()
	defer a.reg.mu.Unlock()
	if owner, ok := a.reg.live[id]; ok && owner != a.agent {
		return false, errUnknownSession
	}
	return a.reg.validateLocked(id)
}

func (a agentSessions) Terminate(id string) (bool, error) {
	a.reg.mu.Lock()
	owner, ok := a.reg.live[id]
	a.reg.mu.Unlock()
	if ok && owner != a.agent {
		return false, errUnknownSession
	}
	return a.reg.Terminate(id)
}

func (s *sessionRegistry) generate(agent string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	id := "mcp-proxy-" + hex.EncodeToString(b[:])
	s.mu.Lock()
	s.live[id] = agent
	s.mu.Unlock()
	return id
}

// Generate implements server.SessionIdManager for the default agent.
func (s *sessionRegistry) Generate() string { return s.generate(defaultAgent) }

// Validate implements server.SessionIdManager.
func (s *sessionRegistry) Validate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validateLocked(id)
}

func (s *sessionRegistry) validateLocked(id string) (bool, error) {
	if _, ok := s.live[id]; ok {
		return false, nil
	}
	if s.terminated[id] {
		return true, nil
	}
	return false, errUnknownSession
}

// Terminate implements server.SessionIdManager.
func (s *sessionRegistry) Terminate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[id]; !ok {
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
