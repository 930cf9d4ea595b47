package downstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Transports a session can run on (the metrics label transport).
const (
	transportStdio = "stdio"
	transportHTTP  = "http"
)

// session is one downstream client: the stdio connection, one HTTP session
// (Mcp-Session-Id), or the single request of a stateless 2026-07-28 HTTP
// client. Its grants are fixed when it starts (docs/agents.md#agents-bundles-and-policy): the agent is
// resolved once. Its methods are safe for concurrent use.
type session struct {
	id        string // the Mcp-Session-Id; "stdio"; "" for a stateless request
	transport string
	agent     *filter.Agent
	perCall   []string // the per-call allow-list; nil when none was given
	// principal names the client beyond its agent, where the transport
	// knows it: sessions, approval answers of stateless clients and audit
	// lines are bound to it.
	principal principal

	// initialized is closed when notifications/initialized arrives: the
	// proxy's requests to the client wait for it (ask).
	initialized chan struct{}
	initOnce    sync.Once
	// open is set once the client has introduced itself (initialize, or
	// a 2026-07-28 server/discover or listen): from then on it takes the
	// notifications no request owns.
	open atomic.Bool
	// state is what the session keeps between its requests (sessionstate.go).
	state sessionState

	asks     asks
	inflight inflight
	// notify carries messages no request owns (list_changed, log messages,
	// resource updates): the stdio connection, or the session's GET stream.
	notify notifyTarget
	// listens are a stdio 2026-07-28 client's subscriptions/listen
	// requests (sendUnowned).
	listens listenSet
	// activity tracks an HTTP session's requests and streams for the idle
	// timeout.
	activity  activity
	closeOnce sync.Once
	done      chan struct{} // closed when the session ends
	inputOnce sync.Once
	inputDone chan struct{} // closed when the client's input has ended (stdio EOF or shutdown)
}

// version is the protocol version the session's initialize negotiated, ""
// before one did.
func (s *session) version() string {
	if c := s.state.Client(); c != nil {
		return c.version
	}
	return ""
}

// clientInfo is what a session-based client declared in initialize.
type clientInfo struct {
	version string // the negotiated protocol version
	caps    clientCaps
}

func newSession(id, transport string, a *filter.Agent, perCall []string) *session {
	s := &session{id: id, transport: transport, agent: a, perCall: perCall, state: newMemState(),
		initialized: make(chan struct{}), done: make(chan struct{}), inputDone: make(chan struct{})}
	s.activity.touch()
	return s
}

// close ends the session: its questions fail, its streams end. Idempotent.
func (s *session) close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.asks.close()
		s.notify.close()
	})
}

// markInitialized records the client's notifications/initialized (in the
// store too, for a shared session). Idempotent.
func (s *session) markInitialized() {
	s.initOnce.Do(func() { close(s.initialized) })
	if sh, ok := s.state.(*sharedState); ok {
		sh.recordInitialized()
	}
}

// endInput records that the client will send nothing more: what only
// waits for the client (a subscriptions/listen) ends. Idempotent.
func (s *session) endInput() { s.inputOnce.Do(func() { close(s.inputDone) }) }

// ended reports whether close ran.
func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// sendUnowned sends a notification no request owns (list_changed, a
// resource update, a log message) the way the client's protocol era
// expects: to a session-era client on its stream (stdio, or its GET
// stream), to a stateless HTTP listen on its stream (notify is the
// listen's), and to a 2026-07-28 client on stdio (one that never sent
// initialize) only through the listens that opted in to it, tagged with
// each one's subscription id (MCP 2026-07-28, basic/patterns/subscriptions).
func (s *session) sendUnowned(msg []byte) {
	if s.transport == transportStdio && s.state.Client() == nil {
		s.listens.send(msg)
		return
	}
	s.notify.send(msg)
}

// sendUnownedHere is sendUnowned to the streams of this replica only: with
// a Redis store nothing goes to the replica holding the session's stream
// (crossreplica.go).
func (s *session) sendUnownedHere(msg []byte) {
	if s.transport == transportStdio && s.state.Client() == nil {
		s.listens.send(msg)
		return
	}
	s.notify.sendLocal(msg)
}

// notifyTarget is where a session's unowned messages go. On stdio it is
// the connection for the session's life; over HTTP it is the GET stream
// while one is open, and messages sent while none is are dropped (the
// transport spec lets a server send them only there).
type notifyTarget struct {
	mu     sync.Mutex
	out    stream
	closed bool
	ended  chan struct{} // closed when out is replaced or the session ends
	// remote takes what arrives while no stream is open here, for the
	// replica holding the session's stream (crossreplica.go); nil: dropped.
	remote func(msg []byte)
}

// setRemote sets where messages go while no stream is open here.
func (n *notifyTarget) setRemote(f func(msg []byte)) {
	n.mu.Lock()
	n.remote = f
	n.mu.Unlock()
}

// attach makes out the target and returns a channel closed when it stops
// being the target (replaced by a newer stream, or the session ended). It
// returns nil when the session has ended.
func (n *notifyTarget) attach(out stream) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	if n.ended != nil {
		close(n.ended)
	}
	n.out, n.ended = out, make(chan struct{})
	return n.ended
}

// detach stops using out if it is still the target.
func (n *notifyTarget) detach(out stream) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.out == out {
		close(n.ended)
		n.out, n.ended = nil, nil
	}
}

// stream is the target, or a stream that takes nothing when there is none.
func (n *notifyTarget) stream() stream {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.out == nil {
		return noStream{}
	}
	return n.out
}

// send writes msg to the target, if there is one, else hands it to
// remote, if set.
func (n *notifyTarget) send(msg []byte) {
	n.mu.Lock()
	out, remote, closed := n.out, n.remote, n.closed
	n.mu.Unlock()
	switch {
	case out != nil:
		_ = out.send(msg) // a gone stream detaches itself
	case remote != nil && !closed:
		remote(msg)
	}
}

// sendLocal writes msg to the target, if there is one here.
func (n *notifyTarget) sendLocal(msg []byte) {
	n.mu.Lock()
	out := n.out
	n.mu.Unlock()
	if out != nil {
		_ = out.send(msg)
	}
}

func (n *notifyTarget) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.ended != nil {
		close(n.ended)
	}
	n.out, n.ended = nil, nil
}

// activity is the last time an HTTP session was used, and how many of its
// requests and streams are open now: a session with none open for
// listen.session_idle_timeout is closed.
type activity struct {
	last atomic.Int64 // unix nanoseconds
	open atomic.Int64
}

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// begin marks a request or stream open; end marks it done.
func (a *activity) begin() { a.open.Add(1); a.touch() }
func (a *activity) end()   { a.open.Add(-1); a.touch() }

// idleSince reports whether nothing is open and nothing happened since t.
func (a *activity) idleSince(t time.Time) bool {
	return a.open.Load() <= 0 && a.last.Load() < t.UnixNano()
}

// logLevels are MCP's log levels, least severe first (RFC 5424 names).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// levelIndex is the index of a level name, -1 for an unknown one.
func levelIndex(level string) int32 {
	for i, l := range logLevels {
		if l == level {
			return int32(i)
		}
	}
	return -1
}

// wantsLog reports whether the session receives a log message of level: a
// client that set no level gets them all (as before logging/setLevel
// existed, and as mcp-go did).
func (s *session) wantsLog(level string) bool {
	min := s.state.Level()
	return min < 0 || levelIndex(level) >= min
}

// allowedToolsHeader carries an HTTP session's per-call allow-list on its
// initialize (docs/agents.md#the-policy-rules, rule 5), a caller-supplied allowed_tools.
const allowedToolsHeader = "X-MCP-Allowed-Tools"

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

// principal is who an HTTP client is within its agent: the subject of
// its OAuth access token, or which of the agent's static tokens it used
// (1-based; 0: none). The zero value is a client the transport cannot tell
// apart (stdio, an agent that needs no token).
type principal struct {
	subject string
	token   int
}

// requestKey tags the context of a request the proxy sends upstream on
// behalf of a client's request (withRequest).
type requestKey struct{}

// request is one client request being answered.
type request struct {
	sess   *session
	id     json.RawMessage
	method string
	params json.RawMessage
	meta   json.RawMessage // params._meta, nil when absent
	// version is the protocol version in effect: the request's own (2026-07-28)
	// or the session's.
	version string
	// modern is true for a request of the stateless 2026-07-28 protocol.
	modern bool
	// decorated: the handler's result already has what decorate adds to
	// a 2026-07-28 result (a view's list, decorated once per view).
	decorated bool
	caps      clientCaps
	// out carries the messages that belong to this request (progress, the
	// proxy's questions to the client) ahead of its response.
	out stream
	// header is the HTTP request's header (nil on stdio): trace context.
	header http.Header
	// prepaid is what a tools/call took in the store with its session's
	// read (prepaid.go), for rateGate to claim; nil: nothing.
	prepaid *prepaid
	// missing is set when a server's request during r needed a client
	// capability r's client did not declare (relay.go): a 2026-07-28
	// client's request then fails with -32021 naming it.
	missing atomic.Pointer[missingCapability]
	// asking counts the server requests made during r that wait for the
	// client's answer, the first of them since askSince (relay.go):
	// meanwhile r is not the call asking anew.
	askMu    sync.Mutex
	asking   int
	askSince time.Time
}

// withRequest tags ctx, the context of a request sent upstream for client
// request r, with r, and with the capabilities of r's client that the
// proxy can honour for it (upcaps.go), which a 2026-07-28 upstream is told
// in the request's _meta: every request sent for a client declares that
// client's, never the proxy's own. Within the proxy a request is passed as
// a value; the request tag is only for the way through an upstream package
// and back: a Streamable HTTP upstream hands the call's context back with a
// server request that arrives on the call's stream, and OnUpstreamRequest
// reads the tag to find the client to ask (relay.go). r may be nil (a
// request for no client, which declares the proxy's own capabilities).
func withRequest(ctx context.Context, r *request) context.Context {
	if r == nil {
		return ctx
	}
	return upstream.WithClientCapabilities(context.WithValue(ctx, requestKey{}, r), r.caps.upstreamCaps())
}

// requestFrom is the client request ctx was sent upstream for, or nil.
func requestFrom(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// notification reports whether r is a client notification (it has no id)
// on its way through the route's middleware.
func (r *request) notification() bool { return r.id == nil }

// linkOK reports whether the client's protocol has the resource_link
// content type (2025-06-18 and later).
func (r *request) linkOK() bool { return r.version == "" || r.version >= "2025-06-18" }
