package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// logLevelTimeout bounds sending logging/setLevel to a server that just
// connected; a server that does not answer in that time keeps its default
// level and the connection is not held up.
const logLevelTimeout = 10 * time.Second

// logLevels are the MCP (RFC 5424) levels, most verbose first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// SetLogLevel sets the level of the log messages (notifications/message)
// this server should send, one of the MCP levels ("debug" ... "emergency"),
// and keeps it for the life of the Conn: a server that advertises logging
// gets logging/setLevel now if it is connected, and again on every later
// connection (a reconnect, a renewed HTTP session) before that connection is
// published, so no server that connects late misses the level. A server on
// the stateless 2026-07-28 protocol, which has no logging/setLevel, gets the
// level in the _meta of every request instead. "" forgets the level (a
// server keeps what it was last told; new connections are told nothing).
//
// It returns the error of the send now (nil when none was due: not
// connected, no logging, level already sent); the level is kept either way.
// An unknown level is refused with an error wrapping ErrBadRequest. Safe for
// concurrent use; the last call wins, and sends never overlap.
func (c *Conn) SetLogLevel(ctx context.Context, level string) error {
	if level != "" && !slices.Contains(logLevels, level) {
		return c.opError(string(mcp.MethodSetLogLevel), fmt.Errorf("%w: unknown log level %q", ErrBadRequest, level))
	}
	c.levelMu.Lock()
	c.level = level
	c.levelMu.Unlock()
	s := c.acquire()
	if s == nil {
		return nil // the next connection gets it
	}
	defer s.end()
	return s.applyLogLevel(ctx)
}

// logLevel is the level set with SetLogLevel, "" if none.
func (c *Conn) logLevel() string {
	c.levelMu.Lock()
	defer c.levelMu.Unlock()
	return c.level
}

// applyLogLevel sends the Conn's current level to this session's server if
// it logs and has not been sent that level yet. Sends of one Conn are
// serialized, and each sends the level current when it runs, so the last
// level set is the last one sent.
func (s *session) applyLogLevel(ctx context.Context) error {
	if !s.caps.Logging || s.modern {
		// A modern session's requests carry the level (modernize), which
		// reads it under levelMu: never reach s.request holding it there.
		return nil
	}
	c := s.c
	c.levelMu.Lock()
	defer c.levelMu.Unlock()
	level := c.level
	if level == "" || level == s.levelSent {
		return nil
	}
	params, err := json.Marshal(map[string]string{"level": level})
	if err != nil {
		return err
	}
	if _, err := s.request(ctx, string(mcp.MethodSetLogLevel), params); err != nil {
		return err
	}
	s.levelSent = level
	return nil
}

// applyLogLevelLater is applyLogLevel on a goroutine of the session, bounded
// by logLevelTimeout: for a session just published, to catch a level set
// while it was connecting. A failure is logged.
func (s *session) applyLogLevelLater() {
	s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, logLevelTimeout)
		defer cancel()
		if err := s.applyLogLevel(ctx); err != nil && s.ctx.Err() == nil {
			s.log.Warn().Err(safe(err)).Msg("logging/setLevel failed; the server keeps its own log level")
		}
	})
}
