package upstream

import "encoding/json"

// State is where a connection stands.
type State int

// The states of a Conn, in the order a healthy connection passes through them.
const (
	// StateConnecting: the first connect attempt has not ended yet.
	StateConnecting State = iota
	// StateConnected: initialized and discovered; requests are accepted.
	StateConnected
	// StateFailed: the connect attempt or the live connection failed; see
	// Snapshot.Err.
	StateFailed
	// StateClosed: Close was called or the Start context ended.
	StateClosed
)

// String returns "connecting", "connected", "failed" or "closed".
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
	default:
		return "unknown"
	}
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
}

// Capabilities is what the upstream advertised in its initialize result.
type Capabilities struct {
	Tools, ToolsListChanged                             bool
	Resources, ResourcesSubscribe, ResourcesListChanged bool
	Prompts, PromptsListChanged                         bool
	Logging, Completions                                bool
}

// Snapshot is everything a Conn knows at one moment. A published Snapshot is
// immutable: its slices are shared between snapshots and must never be
// modified by anyone.
type Snapshot struct {
	// Server is the configured server name.
	Server string
	// State is where the connection stands.
	State State
	// Err says why State is StateFailed (nil otherwise). Its text is
	// sanitized and safe to show to users and to log.
	Err error
	// Tools are the discovered tools in the upstream's order, without
	// nameless or duplicate entries. Empty unless State is StateConnected.
	Tools []Tool
	// Resources, ResourceTemplates and Prompts hold the raw items of every
	// page; nil when the upstream does not advertise the capability.
	Resources, ResourceTemplates, Prompts []json.RawMessage
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
}
