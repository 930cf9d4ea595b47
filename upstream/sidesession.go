package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Side sessions (docs/protocol.md#upstream-protocol). A session-era client
// declares its capabilities once, at initialize, for its session; the
// proxy's own session declares all it can relay (relayCapabilities), so a
// server that decides by the caller's capabilities (what to ask for, or
// whether a tool can run at all) would decide for the proxy, not for the
// client it calls for. Over Streamable HTTP a session costs one handshake,
// so a call made for a client whose capabilities differ goes on a side
// session of the server initialized with that client's capabilities: the
// server sees what it would see directly. A stdio server has one session
// (its process), an SSE server's sessions are streams held open: they keep
// the proxy's.
//
// A side session belongs to the session it was opened from: it lives as
// long as that one, carries calls only (and its GET stream, on which a
// server may send a call's requests; no discovery, no keepalive: the main
// session has those), and is closed with it. One the server has forgotten
// (404) is opened anew for the next call.

// maxSideSessions bounds the side sessions of a session: the capability
// sets a client can declare that the proxy tells apart are eight (sampling,
// form and URL elicitation; roots the proxy answers for every client), so
// this many sides cover every set while one misbehaving set cannot open
// sessions without end. Beyond it a call takes the main session.
const maxSideSessions = 8

// sideMethods are the requests during which a server may ask the client for
// input: the ones whose answer can depend on the client's capabilities. The
// requests about tasks go the same way, since a server knows a task only on
// the session whose call made it (MCP 2025-11-25, tasks), and a client's
// capabilities, so its session, are the same for its call and its tasks.
var sideMethods = map[string]bool{
	string(mcp.MethodToolsCall):     true,
	string(mcp.MethodPromptsGet):    true,
	string(mcp.MethodResourcesRead): true,
	"tasks/get":                     true,
	"tasks/result":                  true,
	"tasks/cancel":                  true,
	"tasks/list":                    true,
}

// sideSessions are a session's side sessions, by capability set. Safe for
// concurrent use; the zero value is empty.
type sideSessions struct {
	mu     sync.Mutex
	closed bool
	m      map[string]*sideEntry
}

// sideEntry is one side session, opened once by whoever asked first.
type sideEntry struct {
	ready chan struct{} // closed once s or err is set
	s     *session
	err   error
}

// sideCaps returns the capabilities a request for the client of ctx should
// be made with on its own session, and false when the main session serves
// it (not a session-era Streamable HTTP session relaying for clients, not a
// method during which the server may ask, no client capabilities in ctx,
// or the client's are those the main session declared).
func (s *session) sideCaps(ctx context.Context, method string) (json.RawMessage, bool) {
	if s.modern || s.c.opts.OnRequest == nil || !sideMethods[method] || s.tr == nil {
		return nil, false
	}
	if _, ok := s.tr.(*httpWire); !ok {
		return nil, false
	}
	if _, ok := ClientCapabilities(ctx); !ok {
		return nil, false
	}
	caps := s.clientCapabilities(ctx) // what the proxy can honour for this client
	if bytes.Equal(caps, relayCapabilitiesCanonical) {
		return nil, false
	}
	return caps, true
}

// relayCapabilitiesCanonical is relayCapabilities as clientCapabilities
// writes a client's: a client that has them all takes the main session.
var relayCapabilitiesCanonical = json.RawMessage(`{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}}`)

// requestOnSide sends a request on the side session for caps, opening it
// if need be, and reports false (nothing sent) when there is none to be
// had: the table is full, the main session is closing, or the side could
// not be opened (the main session then serves the request, as it would
// without sides). A side the server has forgotten is replaced and the
// request sent once more on its successor.
func (s *session) requestOnSide(ctx context.Context, caps json.RawMessage, method string, params json.RawMessage) (json.RawMessage, bool, error) {
	for attempt := 0; ; attempt++ {
		side := s.sides.get(ctx, s, string(caps))
		if side == nil {
			return nil, false, nil
		}
		// A level set since the side opened (or since its last call) goes
		// first, so the server logs this call as the client asked.
		if err := side.applyLogLevel(ctx); err != nil && ctx.Err() == nil {
			side.log.Debug().Err(safe(err)).Msg("logging/setLevel on a side session failed")
		}
		raw, err := side.request(ctx, method, params)
		if !errors.Is(err, ErrSessionExpired) || attempt > 0 {
			return raw, true, err
		}
		s.sides.drop(string(caps), side)
	}
}

// get returns the live side session for key, opening it (from main) when
// there is none, or nil when there is none to be had. A side that could
// not be opened is not tried again while main lives (its failure is
// logged once); one that died is opened anew.
func (t *sideSessions) get(ctx context.Context, main *session, key string) *session {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	e := t.m[key]
	if e != nil {
		select {
		case <-e.ready:
			if e.s != nil && e.s.ctx.Err() != nil {
				delete(t.m, key) // died: open another
				e = nil
			}
		default:
		}
	}
	if e == nil {
		if len(t.m) >= maxSideSessions {
			t.mu.Unlock()
			return nil
		}
		if t.m == nil {
			t.m = map[string]*sideEntry{}
		}
		e = &sideEntry{ready: make(chan struct{})}
		t.m[key] = e
		t.mu.Unlock()
		e.s, e.err = main.openSide(json.RawMessage(key))
		close(e.ready)
		if e.err != nil && main.ctx.Err() == nil {
			main.log.Warn().Err(safe(e.err)).Msg("a session declaring a client's capabilities could not be opened; " +
				"that client's calls take the proxy's session")
		}
		return t.settled(e)
	}
	t.mu.Unlock()
	select {
	case <-e.ready:
		return t.settled(e)
	case <-ctx.Done():
		return nil
	}
}

// settled is the side of an opened entry, nil when it failed; a side
// opened after the table was closed is closed at once.
func (t *sideSessions) settled(e *sideEntry) *session {
	if e.s == nil {
		return nil
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		e.s.close()
		return nil
	}
	return e.s
}

// drop forgets side (the server no longer knows it) and closes it.
func (t *sideSessions) drop(key string, side *session) {
	t.mu.Lock()
	if e := t.m[key]; e != nil && e.s == side {
		delete(t.m, key)
	}
	t.mu.Unlock()
	side.close()
}

// closeAll closes every side session and every one opened from now on.
func (t *sideSessions) closeAll() {
	t.mu.Lock()
	t.closed = true
	entries := t.m
	t.m = nil
	t.mu.Unlock()
	for _, e := range entries {
		<-e.ready // the main session is dead: a handshake under way ends at once
		if e.s != nil {
			e.s.close()
		}
	}
}

// openSide opens a side session of s declaring caps: a Streamable HTTP
// session of the same server at s's protocol version, within the
// server's connect_timeout. requestOnSide tells it the log level.
func (s *session) openSide(caps json.RawMessage) (*session, error) {
	var declared mcp.ClientCapabilities
	if err := json.Unmarshal(caps, &declared); err != nil {
		return nil, fmt.Errorf("client capabilities: %w", err)
	}
	side := newSession(s.c, s.ctx)
	side.declared = &declared
	ctx, cancel := context.WithTimeout(side.ctx, s.c.connectTimeout())
	defer cancel()
	tr, err := side.newTransport(ctx)
	if err != nil {
		side.close()
		return nil, err
	}
	side.tr = tr
	res, err := side.initialize(ctx, s.protocol)
	if err != nil {
		side.close()
		return nil, err
	}
	side.caps = capabilitiesOf(res.Capabilities)
	if h, ok := tr.(*httpWire); ok {
		// A server may send a call's requests on the session's GET stream
		// rather than the call's own (MCP 2025-11-25, basic/transports):
		// the first call goes once it is open, or known not to be.
		h.listen()
		h.awaitGET(ctx)
	}
	return side, nil
}
