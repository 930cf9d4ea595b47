package downstream

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/search"
)

// allowedToolsHeader carries an HTTP session's per-call allow-list on its
// initialize (SPEC §4), the seed's caller-supplied allowed_tools.
const allowedToolsHeader = "X-MCP-Allowed-Tools"

// sessionState is what the proxy keeps per downstream session. Its grants
// are fixed when the session starts (SPEC §5): the agent is resolved once.
type sessionState struct {
	agent *filter.Agent
	// perCall is the session's per-call allow-list; nil when none was given.
	perCall []string

	mu     sync.Mutex
	always map[string]bool // tools the user approved "always" in this session

	deferred deferredState

	sess server.ClientSession // the mcp-go session, once known; see session()

	// parked is the call of a stateless request's state when it may span
	// round trips (mrtr.go); a stateless state serves one request.
	parked *parkedCall
}

func (s *sessionState) setParked(pc *parkedCall) {
	s.mu.Lock()
	s.parked = pc
	s.mu.Unlock()
}

func (s *sessionState) parkedCall() *parkedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parked
}

func (s *sessionState) setSession(sess server.ClientSession) {
	s.mu.Lock()
	s.sess = sess
	s.mu.Unlock()
}

// session is the mcp-go session, or nil (a stateless request's state).
func (s *sessionState) session() server.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

func (s *sessionState) approvedAlways(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.always[tool]
}

func (s *sessionState) approveAlways(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.always == nil {
		s.always = map[string]bool{}
	}
	s.always[tool] = true
}

// ParseAllowedTools splits a comma-separated per-call list. An absent list
// is nil (no narrowing); a present but empty one allows nothing.
func ParseAllowedTools(s string, present bool) []string {
	if !present {
		return nil
	}
	out := []string{}
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// newState starts the state of a session of agent.
func (p *Proxy) newState(agent string, perCall []string) (*sessionState, error) {
	a, err := p.resolveAgent(agent)
	if err != nil {
		return nil, err
	}
	return &sessionState{agent: a, perCall: perCall}, nil
}

// resolveAgent returns the resolved agent, cached per config.
func (p *Proxy) resolveAgent(name string) (*filter.Agent, error) {
	if name == "" {
		name = p.defaultAgentName()
	}
	p.agentsMu.Lock()
	defer p.agentsMu.Unlock()
	if a := p.agents[name]; a != nil {
		return a, nil
	}
	a, err := filter.Resolve(p.gen().cfg, name)
	if err != nil {
		return nil, err
	}
	p.agents[name] = a
	return a, nil
}

// registerState records the state of an HTTP session at its initialize.
func (p *Proxy) registerState(ctx context.Context, header http.Header) {
	s := server.ClientSessionFromContext(ctx)
	if s == nil || s.SessionID() == "" {
		return
	}
	var perCall []string
	if v, ok := header[http.CanonicalHeaderKey(allowedToolsHeader)]; ok {
		perCall = ParseAllowedTools(strings.Join(v, ","), true)
	}
	st, err := p.newState(agentFrom(ctx), perCall)
	if err != nil {
		return // the HTTP layer already refused unknown agents
	}
	st.setSession(s)
	p.states.Store(s.SessionID(), st)
}

// stateFor returns the state of the session a request belongs to. A request
// without a registered session (the stateless 2026-07-28 protocol) gets a
// state built from its agent and its own header.
func (p *Proxy) stateFor(ctx context.Context, sessionID string, header http.Header) (*sessionState, error) {
	if sessionID == "" {
		if s := server.ClientSessionFromContext(ctx); s != nil {
			sessionID = s.SessionID()
		}
	}
	if v, ok := p.states.Load(sessionID); ok && sessionID != "" {
		// A session's state serves its own agent's endpoint only.
		if st := v.(*sessionState); st.agent.Name == agentFrom(ctx) || sessionID == "stdio" {
			return st, nil
		}
	}
	var perCall []string
	if v, ok := header[http.CanonicalHeaderKey(allowedToolsHeader)]; ok {
		perCall = ParseAllowedTools(strings.Join(v, ","), true)
	}
	return p.newState(agentFrom(ctx), perCall)
}

// view is the tools one kind of session sees: its agent and per-call list
// applied to one catalog.
type view struct {
	catalog  *Catalog
	listJSON []byte // for sessions that have activated nothing

	searchOnce sync.Once // the tool_search index of the view, built on first use
	index      *search.Index
	docs       map[string]*search.Doc
}

type viewKey struct {
	agent   *filter.Agent
	perCall string
}

// viewFor returns the session's view of the current catalog, computed once
// per (agent, per-call list, catalog) and shared by the sessions alike.
func (p *Proxy) viewFor(st *sessionState) *view {
	c := p.Catalog()
	if st.perCall != nil {
		// Client-chosen lists are not cached: a client could grow the cache
		// without end by sending a new list each time.
		return &view{catalog: c, listJSON: p.sessionList(&sessionState{agent: st.agent, perCall: st.perCall})}
	}
	key := viewKey{agent: st.agent, perCall: perCallKey(st.perCall)}
	p.viewsMu.Lock()
	defer p.viewsMu.Unlock()
	if v := p.views[key]; v != nil && v.catalog == c {
		return v
	}
	v := &view{catalog: c, listJSON: p.sessionList(&sessionState{agent: st.agent, perCall: st.perCall})}
	p.views[key] = v
	return v
}

// listFor is the session's tools array: the shared view while the session
// has activated nothing, else its own.
func (p *Proxy) listFor(st *sessionState) []byte {
	if st.deferred.empty() {
		return p.viewFor(st).listJSON
	}
	return p.sessionList(st)
}

func perCallKey(list []string) string {
	if list == nil {
		return "\x00none"
	}
	return strings.Join(list, ",")
}

// policyTool describes an entry to the policy.
func (e *ToolEntry) policyTool() filter.Tool {
	return filter.Tool{Exposed: e.Exposed, Server: e.Server, ReadOnly: e.ReadOnly, Filtered: e.Filtered}
}

// denied is the isError result of a tool a policy rule 3–6 denies (SPEC §5).
func denied(exposed string, rule filter.Rule) []byte {
	return textResult("tool '"+exposed+"' is denied by "+string(rule), true)
}

// textResult builds a tools/call result with one text item.
func textResult(text string, isError bool) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"content":[{"type":"text","text":`)
	buf.Write(rawjson.String(text))
	buf.WriteString(`}]`)
	if isError {
		buf.WriteString(`,"isError":true`)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// clientCanElicit reports whether the session's client declared the
// elicitation capability.
func clientCanElicit(ctx context.Context) bool {
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok {
		return false
	}
	caps := s.GetClientCapabilities()
	return caps.Elicitation != nil
}
