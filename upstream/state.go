package upstream

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// State is where a connection stands.
type State int

// The states of a Conn. A connection that drops goes from StateConnected to
// StateFailed, then through StateConnecting (an attempt) and StateFailed
// (the wait before the next one) until it connects again, or to StateParked
// once the reconnect attempts are spent.
const (
	// StateConnecting: a connect attempt is under way (the first one, or a
	// reconnect attempt: see Snapshot.Attempt).
	StateConnecting State = iota
	// StateConnected: initialized and discovered; requests are accepted.
	StateConnected
	// StateFailed: the last connect attempt or the live connection failed
	// (Snapshot.Err); the next attempt starts at Snapshot.NextRetry.
	StateFailed
	// StateClosed: Close was called or the Start context ended.
	StateClosed
	// StateParked: every reconnect attempt failed; the server is probed
	// with a full connect attempt every probe interval (300 s), the next one
	// at Snapshot.NextRetry.
	StateParked
	// StateNeedsAuth: the server wants an OAuth authorization the proxy
	// does not have (no token yet, or a refresh was refused). Snapshot.Err
	// says what to do; no reconnect is scheduled: the server connects as
	// soon as a token arrives (a login of this process, or one that
	// `mcp-proxy auth login` stored).
	StateNeedsAuth
)

// String returns "connecting", "connected", "failed", "closed", "parked" or
// "needs_auth".
func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateConnected:
		return "connected"
	case StateFailed:
		return "failed"
	case StateClosed:
		return "closed"
	case StateParked:
		return "parked"
	case StateNeedsAuth:
		return "needs_auth"
	default:
		return "unknown"
	}
}

// Status is the word for where the server stands, the same wherever a
// person reads it: the tools verb, the status page, the startup summary
// and the logs. It is State's word, except that a reconnect attempt after
// a failure (StateConnecting with Err set) reads "failed": the server is
// down and its last error stands until an attempt succeeds, so a server
// that keeps failing does not read "connecting" in one place and "failed"
// in another depending on the moment. Attempt says it is being retried.
func (s *Snapshot) Status() string {
	if s.State == StateConnecting && s.Err != nil {
		return StateFailed.String()
	}
	return s.State.String()
}

// Tool is one tool of an upstream, as the upstream listed it.
type Tool struct {
	// Name is the upstream's own tool name.
	Name string
	// Description is "" if the upstream sent none (or not a string).
	Description string
	// Raw is the tool object exactly as the upstream sent it: a byte-exact
	// slice of the tools/list page. Never modify it; copy first.
	Raw json.RawMessage
	// ReadOnly is true when annotations.readOnlyHint is true.
	ReadOnly bool

	// headers is the tool as the SEP-2243 helpers need it when it declares
	// x-mcp-header parameters, else nil (modern.go).
	headers *mcp.Tool
}

// Capabilities is what the upstream advertised in its initialize result.
type Capabilities struct {
	Tools, ToolsListChanged                             bool
	Resources, ResourcesSubscribe, ResourcesListChanged bool
	Prompts, PromptsListChanged                         bool
	Logging, Completions                                bool
	// Tasks is the tasks capability of MCP 2025-11-25 (basic/utilities/tasks):
	// what of tasks/list, tasks/cancel and task-augmented tools/call the
	// server takes. The zero value is no tasks.
	Tasks TaskCapabilities
}

// TaskCapabilities is an upstream's tasks capability (MCP 2025-11-25).
type TaskCapabilities struct {
	// ToolCalls is tasks.requests.tools.call: tools/call may carry a task.
	ToolCalls bool
	// List is tasks.list, Cancel tasks.cancel.
	List, Cancel bool
}

// Any reports whether the server declared the tasks capability at all.
func (t TaskCapabilities) Any() bool { return t.ToolCalls || t.List || t.Cancel }

// CacheHint is what a list result said of how long it stays fresh and who
// may share it (ttlMs and cacheScope, MCP 2026-07-28,
// server/utilities/caching). The zero value is no hint: the list is stale
// at once and private.
type CacheHint struct {
	// Given is set when the result carried a ttlMs.
	Given bool
	// TTL is ttlMs (a negative one is 0; at most a day).
	TTL time.Duration
	// Public is set for cacheScope "public".
	Public bool
	// Fetched is when the list was read.
	Fetched time.Time
}

// Remaining is how long the list stays fresh after now: 0 when no hint
// was given or it has passed.
func (h CacheHint) Remaining(now time.Time) time.Duration {
	if !h.Given {
		return 0
	}
	return max(h.Fetched.Add(h.TTL).Sub(now), 0)
}

// Stale reports whether a list that was given a positive TTL has outlived
// it at now: the proxy reads it again (Conn.RefreshStale). A list given no
// hint or a TTL of 0 is kept until the server says it changed
// (list_changed), as before the revision.
func (h CacheHint) Stale(now time.Time) bool {
	return h.Given && h.TTL > 0 && !now.Before(h.Fetched.Add(h.TTL))
}

// Narrow is the hint of a list made of h's and o's: the earlier end of
// freshness, public only when both are. It is given only when both are.
func (h CacheHint) Narrow(o CacheHint) CacheHint {
	if !h.Given || !o.Given {
		return CacheHint{}
	}
	out := h
	if o.Fetched.Add(o.TTL).Before(h.Fetched.Add(h.TTL)) {
		out.TTL, out.Fetched = o.TTL, o.Fetched
	}
	out.Public = h.Public && o.Public
	return out
}

// Snapshot is everything a Conn knows at one moment. A published Snapshot is
// immutable: its slices are shared between snapshots and must never be
// modified by anyone.
type Snapshot struct {
	// Server is the configured server name.
	Server string
	// State is where the connection stands.
	State State
	// Err says why the server is down: set in StateFailed, StateParked and
	// StateNeedsAuth (there it names the command that authorizes it),
	// and kept in StateConnecting while a reconnect attempt runs; nil when
	// connected, closed, or during the first attempt. Its text is sanitized
	// and safe to show to users and to log.
	Err error
	// Attempt numbers the connect attempts since the server was last up:
	// 0 is the first connection after Start or the live connection that
	// dropped, 1, 2, ... are the reconnect attempts that follow (probes of
	// a parked server continue the count). In StateConnecting it is the
	// attempt under way; in StateFailed and StateParked the one that failed.
	// 0 when connected or closed.
	Attempt int
	// NextRetry is when the next connect attempt starts; set in StateFailed
	// and StateParked only.
	NextRetry time.Time
	// StartupUntil is set during the first connection attempt: until then
	// (Options.StartupDeadline) a request waits for that attempt instead of
	// failing. Zero otherwise.
	StartupUntil time.Time
	// ReconnectUntil is set within reconnect_wait of a dropped connection
	// (StateFailed and StateConnecting): the end of that window, fixed at the
	// drop. Until then the snapshot keeps the catalog of the connection that
	// dropped, its tools stay listed (Listed) and a request waits for the
	// reconnection. Zero otherwise; a snapshot with it zeroed is published
	// when the window closes with the server still down.
	ReconnectUntil time.Time
	// Tools are the discovered tools in the upstream's order, without
	// nameless or duplicate entries. Empty unless State is StateConnected or
	// ReconnectUntil is set.
	Tools []Tool
	// Resources, ResourceTemplates and Prompts hold the raw items of every
	// page; nil when the upstream does not advertise the capability.
	Resources, ResourceTemplates, Prompts []json.RawMessage
	// ToolsHint, ResourcesHint, TemplatesHint and PromptsHint are the cache
	// hints of the lists as last read (CacheHint); none for a server that
	// gives none (every session-era server).
	ToolsHint, ResourcesHint, TemplatesHint, PromptsHint CacheHint
	// Capabilities is what the upstream advertised.
	Capabilities Capabilities
	// ServerInfo is the upstream's serverInfo object (re-encoded by mcp-go's
	// typed initialize result, so unknown fields are not kept).
	ServerInfo json.RawMessage
	// Instructions is the upstream's instructions text, "" if none.
	Instructions string
	// ProtocolVersion is the negotiated MCP protocol version.
	ProtocolVersion string
	// Generation increases by one on every publish; the initial snapshot
	// (StateConnecting, never published) has Generation 0.
	Generation uint64
	// Announced counts the upstream's list_changed announcements since the
	// Conn was made (set by the publisher).
	Announced Announced
}

// Announced counts an upstream's list_changed announcements per list, each
// counted when the list it asked for has been read again and published,
// whether or not it changed: a snapshot whose count grew follows an
// announcement (MCP specification, notifications/tools/list_changed and
// the resources and prompts ones), while one with the same counts and the
// same lists (a reconnection, say) says nothing new.
type Announced struct {
	Tools, Resources, Prompts uint64
}

// count counts one announcement of each list in k.
func (a *Announced) count(k kind) {
	if k&kindTools != 0 {
		a.Tools++
	}
	if k&(kindResources|kindTemplates) != 0 {
		a.Resources++
	}
	if k&kindPrompts != 0 {
		a.Prompts++
	}
}

// Listed reports whether the server's tools are listed: it is connected, or
// within reconnect_wait of a dropped connection (see ReconnectUntil).
func (s *Snapshot) Listed() bool {
	return s.State == StateConnected || s.inWindow(time.Now())
}

// Available reports whether a request for the server is sent at once or
// waits for its connection (first connection, or within the reconnect
// window); false means Request refuses it at once with a *DownError.
func (s *Snapshot) Available() bool {
	now := time.Now()
	return s.State == StateConnected || s.inWindow(now) || now.Before(s.StartupUntil)
}

// inWindow reports whether now is within the reconnect window.
func (s *Snapshot) inWindow(now time.Time) bool {
	return (s.State == StateFailed || s.State == StateConnecting) && now.Before(s.ReconnectUntil)
}

// sameSnapshot reports whether a and b say the same, Server, Generation and
// Announced (set by the publisher) aside: a re-discovery or
// re-initialization that finds this publishes nothing.
func sameSnapshot(a, b *Snapshot) bool {
	x, y := *a, *b
	x.Server, y.Server = "", ""
	x.Generation, y.Generation = 0, 0
	x.Announced, y.Announced = Announced{}, Announced{}
	return reflect.DeepEqual(x, y)
}
