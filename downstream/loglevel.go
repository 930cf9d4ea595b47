package downstream

import (
	"context"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// The log levels passed upstream (docs/protocol.md#requests-from-servers). Each session sets its own
// level with logging/setLevel and receives only the upstream log messages
// at or above it (forwardLog, session.wantsLog). Each upstream connection
// is told the most verbose level of the live sessions granted its server,
// and told again whenever that changes: a session sets a level, a session
// that had one ends, or a reload brings a new connection (a server added
// or restarted by a reload starts with no level at all). With a Redis
// store, a session's level is set on whichever replica the client asked:
// another replica that picks the session up, or reads a level changed
// elsewhere, tells its own upstreams before it serves the request
// (sessionTable.relevel), so the client's logs are filtered the same
// whichever replica serves it (docs/shared-state.md#log-levels).

// levelSendTimeout bounds one SetLogLevel: a server that does not answer
// keeps its level, and the next change is not held up for long.
const levelSendTimeout = 10 * time.Second

// levelSync passes each upstream connection the level the sessions want.
// It is keyed by the connection, not the server name, so a reload's new
// connection for a known name is told the level too. Changes never wait
// for an upstream: each connection has at most one goroutine passing its
// levels on, in order, and that goroutine sends the latest wanted level
// each time, so the last change made is the last level the server gets.
type levelSync struct {
	mu    sync.Mutex
	conns map[Upstream]*connLevel
	// senders are the goroutines passing levels on, those of connections a
	// reload closed included: once it is zero, every level wanted so far has
	// been sent and nothing more will be until the next change.
	senders sync.WaitGroup
	// active counts the senders too, under mu, for waitSent; idle is
	// closed when it drops to zero.
	active int
	idle   chan struct{}
}

// waitSent waits until every level wanted so far has been passed on (each
// send bounded by levelSendTimeout), or ctx ends.
func (ls *levelSync) waitSent(ctx context.Context) {
	ls.mu.Lock()
	if ls.active == 0 {
		ls.mu.Unlock()
		return
	}
	idle := ls.idle
	ls.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// connLevel is the level one connection should have and the one last
// passed on to it ("": none). busy is set while a goroutine passes levels on.
type connLevel struct {
	want, sent string
	busy       bool
}

// applyLogLevels passes to every upstream the most verbose level set by
// a live session granted its server, or "" (forget it) when none has set
// one. It returns at once; the sends run behind it, in order per
// connection. Call it after anything that can change those levels.
func (rl *relay) applyLogLevels() {
	ls := &rl.levels
	ls.mu.Lock()
	defer ls.mu.Unlock()
	// Read under ls.mu: the last call to take the lock sees the latest
	// generation and levels, so its decision is the one that stands.
	g := rl.gen()
	want := make(map[string]int32, len(g.ups))
	rl.sessions.each(func(s *session) {
		l := s.state.Level()
		if l < 0 || s.ended() {
			return
		}
		for name := range g.ups {
			if cur, ok := want[name]; s.agent.Granted(name) && (!ok || l < cur) {
				want[name] = l
			}
		}
	})
	if ls.conns == nil {
		ls.conns = map[Upstream]*connLevel{}
	}
	live := make(map[Upstream]bool, len(g.ups))
	for name, u := range g.ups {
		live[u] = true
		level := ""
		if l, ok := want[name]; ok {
			level = logLevels[l]
		}
		cl := ls.conns[u]
		if cl == nil {
			cl = &connLevel{}
			ls.conns[u] = cl
		}
		cl.want = level
		if cl.want != cl.sent && !cl.busy {
			cl.busy = true
			if ls.active == 0 {
				ls.idle = make(chan struct{})
			}
			ls.active++
			ls.senders.Go(func() { rl.passLevels(name, u, cl) })
		}
	}
	for u := range ls.conns {
		if !live[u] {
			delete(ls.conns, u) // closed by a reload; a running sender ends on its own
		}
	}
}

// passLevels sends cl's wanted level to u until the level sent is the one
// wanted. It is the only sender for u while cl.busy is set.
func (rl *relay) passLevels(server string, u Upstream, cl *connLevel) {
	ls := &rl.levels
	for {
		ls.mu.Lock()
		level := cl.want
		if level == cl.sent {
			cl.busy = false
			if ls.active--; ls.active == 0 {
				close(ls.idle)
			}
			ls.mu.Unlock()
			return
		}
		ls.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), levelSendTimeout)
		err := u.SetLogLevel(ctx, level) // keeps the level for later connections too, even when the send fails
		cancel()
		if err != nil {
			rl.log.Debug().Str("server", server).Str("error", sanitize.Error(err.Error())).Msg("logging/setLevel not passed on")
		}
		ls.mu.Lock()
		cl.sent = level
		ls.mu.Unlock()
	}
}
