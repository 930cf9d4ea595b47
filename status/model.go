package status

import (
	"time"

	"github.com/mcp-proxy/mcp-proxy/integrity"
)

// State is what the page shows of the proxy, gathered for each request by
// Options.State. Its texts may come from upstreams (errors, tool
// definitions): the page cleans every one with Options.Scrub and escapes
// it as HTML.
type State struct {
	// Servers are every configured server, sorted by name.
	Servers []Server
	// Held are the tools tool integrity quarantines, sorted by server and
	// tool (docs/security.md#tool-integrity).
	Held []HeldTool
	// Findings are the served tools with description scan findings
	// (scan: warn or strip), sorted by server and tool.
	Findings []ToolFindings
}

// Server states the page knows besides the upstream connection's own
// (connecting, connected, failed, parked, needs_auth, closed).
const StateDisabled = "disabled"

// Server is one configured server.
type Server struct {
	Name string
	// Transport is stdio, http or sse.
	Transport string
	// State is the connection's state (upstream.State's text), or
	// StateDisabled.
	State string
	// Error says why the server is down (failed, parked, needs_auth, or
	// connecting again after a failure); "" when none.
	Error string
	// NextRetry is when the next connect attempt starts (failed, parked).
	NextRetry time.Time
	// ReconnectUntil is the end of the reconnect window after a drop, while
	// the server's tools stay listed (docs/operations.md#startup); zero outside it.
	ReconnectUntil time.Time
	// Protocol is the negotiated MCP protocol version; "" before any.
	Protocol string
	// Exposed, Excluded and Quarantined count the server's tools: listed
	// to an agent granted the server, dropped by tools.include/exclude,
	// held by tool integrity. All 0 while it is not connected.
	Exposed, Excluded, Quarantined int
	// Auth is the server's OAuth standing; nil for a server without
	// auth.type oauth or client_credentials.
	Auth *Auth
}

// Auth is an OAuth server's standing (docs/security.md#oauth-upstreams), never a token.
type Auth struct {
	// Kind is oauth or client_credentials.
	Kind string
	// State is authorized, expired, needs_login or error (the token
	// store's view: oauthclient.Status).
	State string
	// Expiry is when the access token expires; zero when unknown or none.
	Expiry time.Time
	// Browser: the server logs in through a browser (oauth), so a server
	// in needs_auth gets a "Log in" button.
	Browser bool
}

// HeldTool is one quarantined tool.
type HeldTool struct {
	Server  string
	Tool    string // the upstream's own name
	Exposed string // the name clients would see
	// Reasons are why it is held (changed, new, scan, store_error).
	Reasons []integrity.Reason
	// Fingerprint is the SHA-256 of its current definition: what Approve
	// pins, and only while it is still the pending one.
	Fingerprint string
	// Approvable: a changed or new definition is pending; Approve pins it.
	Approvable bool
	// Diff is the unified diff of the pinned and the pending definition
	// (integrity.Change.Diff); "" when nothing is pending.
	Diff string
	// Findings are the description scan's findings on the tool.
	Findings []integrity.Finding
	// Hint says how to release a tool that Approve cannot (a scan hold, an
	// unreadable pin file).
	Hint string
}

// ToolFindings are the scan findings of a served tool.
type ToolFindings struct {
	Server, Tool, Exposed string
	Findings              []integrity.Finding
}
