package upstream

import (
	"strconv"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// DownError is why a request for a server was not sent: the server is not
// connected, and the request could not wait for it (see wait.go) or its
// wait ran out. It matches ErrNotConnected (errors.Is) and unwraps to Cause.
// Its text is the one to show the host, sanitized and at most 500
// characters:
//
//	MCP server 'fx' is not connected: process exited with status 1; last stderr: …; next attempt in 2s (at 2026-12-01T11:35:17Z)
//	MCP server 'fx' is not connected (parked after 5 failed reconnect attempts): …; next attempt in 4m59s (at …)
//	MCP server 'fx' is not connected (connecting): connect timed out after 1m0s: …; the request waited 5s and was not sent
//
// It starts with the seed's "MCP server '<name>' is not connected".
type DownError struct {
	// Server is the configured server name.
	Server string
	// State is where the connection stood.
	State State
	// Cause is why the server is down (the snapshot's Err), nil if unknown
	// (its first connection is under way, or it was closed).
	Cause error
	// NextRetry is when the next connect attempt starts; zero when none is
	// scheduled or one is under way.
	NextRetry time.Time
	// Waited is how long the request waited before it was refused; 0 when
	// it was refused at once.
	Waited time.Duration
	// Overflow is true when the request was refused because too many
	// requests were waiting for the server already.
	Overflow bool

	at time.Time // when the error was made, for "next attempt in"
}

// DownError returns the error a request for this server gets when it is
// refused without being sent, as of now; nil when the server is connected.
// The downstream uses it for a call to a tool of a granted server that is
// down and whose tools it does not know ("unknown tool" would hide why).
func (s *Snapshot) DownError() *DownError {
	if s.State == StateConnected {
		return nil
	}
	return s.downError()
}

// downError is DownError that also describes a connected snapshot (whose
// session died before the supervisor published it).
func (s *Snapshot) downError() *DownError {
	e := &DownError{Server: s.Server, State: s.State, Cause: s.Err, at: time.Now()}
	if s.State == StateFailed || s.State == StateParked {
		e.NextRetry = s.NextRetry
	}
	return e
}

// after returns a copy of e for a request that waited d.
func (e *DownError) after(d time.Duration) *DownError {
	cp := *e
	cp.Waited = d
	return &cp
}

// overflow returns a copy of e for a request refused because too many wait.
func (e *DownError) overflow() *DownError {
	cp := *e
	cp.Overflow = true
	return &cp
}

// Error returns the text described on the type.
func (e *DownError) Error() string {
	var b strings.Builder
	b.WriteString("MCP server '" + e.Server + "' is not connected")
	switch e.State {
	case StateFailed:
	case StateParked:
		b.WriteString(" (parked after " + strconv.Itoa(reconnectAttempts) + " failed reconnect attempts)")
	case StateConnected:
		b.WriteString(" (its connection has just ended)")
	default:
		b.WriteString(" (" + e.State.String() + ")")
	}
	if e.Cause != nil {
		b.WriteString(": " + e.Cause.Error())
	}
	if !e.NextRetry.IsZero() {
		in := max(e.NextRetry.Sub(e.at), 0).Round(time.Millisecond)
		b.WriteString("; next attempt in " + in.String() + " (at " + e.NextRetry.UTC().Format(time.RFC3339) + ")")
	}
	switch {
	case e.Overflow:
		b.WriteString("; " + strconv.Itoa(maxWaiting) + " requests are waiting for it already, so this one was not sent")
	case e.Waited > 0:
		b.WriteString("; the request waited " + e.Waited.Round(time.Millisecond).String() + " and was not sent")
	}
	return sanitize.Error(b.String())
}

// Is makes errors.Is(err, ErrNotConnected) true.
func (e *DownError) Is(target error) bool { return target == ErrNotConnected }

// Unwrap returns Cause.
func (e *DownError) Unwrap() error { return e.Cause }
