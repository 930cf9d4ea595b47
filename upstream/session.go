package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
)

// Version is the clientInfo.version the proxy sends upstream; the build sets
// it (-ldflags "-X github.com/mcp-proxy/mcp-proxy/upstream.Version=...").
var Version = "dev"

// clientName is the clientInfo.name the proxy sends upstream.
const clientName = "mcp-proxy"

// session is one connected generation of a Conn: one transport, one
// initialize, one catalog. It dies once (die) and is torn down once (close);
// a reconnect makes a new session, and so does the renewal of an expired
// HTTP session (expire), which hands waiting requests its successor.
type session struct {
	c    *Conn
	log  zerolog.Logger
	tr   wire
	proc *process // stdio only

	// initializeOnly skips the server/discover probe of protocol auto: the
	// stdio child was respawned because it exited on it.
	initializeOnly bool

	// declared, when set, is what initialize declares instead of the
	// proxy's relay capabilities: a side session's client's
	// (sidesession.go).
	declared *mcp.ClientCapabilities
	sides    sideSessions // the side sessions opened from this one

	httpBase *http.Transport // http and sse only: the session's own pool

	ctx     context.Context // ends when the session dies
	cancel  context.CancelCauseFunc
	dead    chan struct{}
	dieOnce sync.Once
	err     error // why it died; set before dead is closed

	// Set by open before the session is published, read-only afterwards.
	protocol     string
	modern       bool
	caps         Capabilities
	serverInfo   json.RawMessage
	instructions string
	initial      *catalog

	levelSent string // the log level this server was sent; guarded by c.levelMu

	notes   noteQueue     // to OnNotification, see notify.go
	dropped atomic.Uint64 // notifications dropped since the last delivery
	// queued and delivered count notifications handed off and passed on
	// (or dropped); barrier compares them.
	queued, delivered atomic.Uint64
	refresh           refresher

	// HTTP session renewal: expire closes expired (once), which asks the
	// supervisor to renew; finishRenewal sets next (the successor, nil if
	// the renewal failed) and renewErr, then closes renewed.
	expired    chan struct{}
	expireOnce sync.Once
	renewed    chan struct{}
	renewOnce  sync.Once
	next       *session
	renewErr   error

	// retiring is closed when a renewed session is retired: its background
	// loops stop, and it is closed once calls drops to zero.
	retiring chan struct{}

	mu        sync.Mutex // guards closing against wg.Add, retired, calls and idle
	closing   bool
	retired   bool
	calls     int           // requests in flight (begin/end)
	idle      chan struct{} // closed when calls reaches 0 after retire
	wg        sync.WaitGroup
	closeOnce sync.Once
}

func newSession(c *Conn, lifetime context.Context) *session {
	ctx, cancel := context.WithCancelCause(lifetime)
	return &session{
		c:        c,
		log:      c.log,
		ctx:      ctx,
		cancel:   cancel,
		dead:     make(chan struct{}),
		refresh:  refresher{wake: make(chan struct{}, 1)},
		expired:  make(chan struct{}),
		renewed:  make(chan struct{}),
		retiring: make(chan struct{}),
	}
}

// connect makes one connection attempt bounded by connect_timeout: transport,
// initialize, first discovery. The returned session is live but not yet
// published; its catalog is in s.initial.
func (c *Conn) connect(lifetime context.Context) (*session, error) {
	s, err := c.connectOnce(lifetime, false)
	if errors.Is(err, errExitedOnDiscover) && lifetime.Err() == nil {
		// A server that exits on a request it does not know: once more,
		// straight to initialize, within the same attempt.
		c.log.Info().Err(safe(err)).Msg("the server exited on server/discover; respawning it for initialize")
		s, err = c.connectOnce(lifetime, true)
	}
	return s, err
}

// connectOnce is one connection of connect; initializeOnly skips the
// server/discover probe.
func (c *Conn) connectOnce(lifetime context.Context, initializeOnly bool) (*session, error) {
	s := newSession(c, lifetime)
	s.initializeOnly = initializeOnly
	timeout := c.connectTimeout()
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	if err := s.open(ctx); err != nil {
		exited := errors.Is(err, errExitedOnDiscover)
		err = s.explain(ctx, timeout, err)
		if exited && !errors.Is(err, errExitedOnDiscover) {
			err = fmt.Errorf("%w: %w", errExitedOnDiscover, err)
		}
		// Tear the attempt down in the background, so the failure is
		// published at once; Close waits for it (c.wg is held by run).
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			s.close()
		}()
		return nil, err
	}
	return s, nil
}

// open starts the transport, initializes and discovers.
func (s *session) open(ctx context.Context) error {
	tr, err := s.newTransport(ctx)
	if err != nil {
		return err
	}
	s.tr = tr
	if st, ok := tr.(*stdioTransport); ok {
		st.setRequestHandler(s.answer)
		st.setRawNotificationHandler(s.onRawNotification)
		if s.proc != nil {
			s.proc.onEnd(s.processEnded)
		}
		// The child's requests are answered while the session lives.
		st.start(s.ctx)
	}

	res, err := s.handshake(ctx)
	if err != nil {
		return err
	}
	if h, ok := tr.(*httpWire); ok && !s.modern {
		h.listen() // the stateless core has no GET stream
	}
	s.caps = capabilitiesOf(res.Capabilities)
	s.instructions = res.Instructions
	if info, err := json.Marshal(res.ServerInfo); err == nil {
		s.serverInfo = info
	}
	// Before discovery, so that a level set before this server connected
	// applies to everything it does (SetLogLevel).
	if err := s.applyLogLevel(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn().Err(safe(err)).Msg("logging/setLevel failed; the server keeps its own log level")
	}

	cat, err := s.discover(ctx, allKinds)
	if err != nil {
		return err
	}
	s.initial = cat
	return nil
}

// explain turns a failed connect step into the error the user should see:
// why the session died if it did (a child's exit status says more than the
// request that noticed it), or a timeout naming connect_timeout.
func (s *session) explain(ctx context.Context, timeout time.Duration, err error) error {
	if s.proc != nil && (errors.Is(err, errTransportClosed) || errors.Is(err, context.Canceled) ||
		errors.Is(err, ErrConnectionLost) || errors.Is(err, errSessionEnded)) {
		waitClosed(s.dead, stdoutEOFGrace)
	}
	select {
	case <-s.dead:
		if !errors.Is(s.err, errSessionClosed) {
			return s.err
		}
	default:
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w after %s: %w", ErrConnectTimeout, timeout, err)
	}
	return err
}

func capabilitiesOf(c mcp.ServerCapabilities) Capabilities {
	var out Capabilities
	if c.Tools != nil {
		out.Tools, out.ToolsListChanged = true, c.Tools.ListChanged
	}
	if c.Resources != nil {
		out.Resources = true
		out.ResourcesSubscribe, out.ResourcesListChanged = c.Resources.Subscribe, c.Resources.ListChanged
	}
	if c.Prompts != nil {
		out.Prompts, out.PromptsListChanged = true, c.Prompts.ListChanged
	}
	out.Logging = c.Logging != nil
	out.Completions = c.Completions != nil
	if t := c.Tasks; t != nil {
		out.Tasks.List, out.Tasks.Cancel = t.List != nil, t.Cancel != nil
		out.Tasks.ToolCalls = t.Requests != nil && t.Requests.Tools != nil && t.Requests.Tools.Call != nil
	}
	return out
}

// startBackground starts what a published session runs: re-discovery on
// list_changed and the keepalive pings, or in the 2026-07-28 era the
// subscriptions/listen stream.
func (s *session) startBackground() {
	keepalive := s.c.cfg.Keepalive.D()
	if s.modern {
		// The stateless core has no session to keep alive (keepalive pings
		// are a session-era feature); its notifications come on
		// subscriptions/listen.
		keepalive = 0
		s.spawn(s.listen)
	}
	s.spawn(func() { s.background(keepalive) })
}

// spawn runs fn on a goroutine that close waits for. It reports false, and
// does not run fn, once the session is closing.
func (s *session) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// die records why the session ended (the first reason wins), ends its
// context, which fails every request in flight at once, and closes dead.
func (s *session) die(err error) {
	s.dieOnce.Do(func() {
		s.err = safe(err)
		s.cancel(s.err)
		close(s.dead)
	})
}

// deathErr is why the session died; call it after dead is closed.
func (s *session) deathErr() error {
	<-s.dead
	return s.err
}

// close tears the session down: it dies (if it had not), requests waiting
// for its renewal are released, the transport is closed, a stdio child and
// its process group are stopped, and every goroutine of the session is
// waited for. Idempotent and bounded.
func (s *session) close() {
	s.closeOnce.Do(func() {
		s.die(errSessionClosed)
		s.finishRenewal(nil, s.deathErr())
		s.sides.closeAll()
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		if s.tr != nil {
			if err := s.tr.Close(); err != nil {
				s.log.Debug().Err(safe(err)).Msg("close transport")
			}
		}
		if s.proc != nil {
			s.proc.terminate()
		}
		if s.httpBase != nil {
			// Keep-alive connections would outlive the session (and their
			// goroutines with them) until the idle timeout.
			s.httpBase.CloseIdleConnections()
		}
		s.wg.Wait()
	})
}

// expire reports that the server no longer knows this HTTP session; the
// supervisor renews it (once). It never blocks.
func (s *session) expire() {
	s.expireOnce.Do(func() { close(s.expired) })
}

// sessionExpired reports whether err means that the server refused a
// request, unexecuted, because it no longer knows the session id: a 404 or
// 410 to a request that carried it, or another request met one first
// (errSessionGone).
func (s *session) sessionExpired(err error) bool {
	return errors.Is(err, errSessionGone)
}

// finishRenewal ends the renewal of s (once): next is its successor, or nil
// with err saying why there is none.
func (s *session) finishRenewal(next *session, err error) {
	s.renewOnce.Do(func() {
		s.next, s.renewErr = next, err
		close(s.renewed)
	})
}

// awaitRenewal asks for s to be renewed and waits for its successor, or for
// ctx. With no successor the error matches ErrNotConnected and
// ErrSessionExpired.
func (s *session) awaitRenewal(ctx context.Context) (*session, error) {
	s.expire()
	select {
	case <-s.renewed:
		if s.next == nil {
			return nil, expiredErr(s.renewErr)
		}
		return s.next, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// begin registers a request in flight; it reports false once the session
// is closing. Every true begin is paired with one end.
func (s *session) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.calls++
	return true
}

func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls--
	if s.calls == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// retire stops the background work of a session that was replaced, and
// returns a channel closed once no request is in flight on it.
func (s *session) retire() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.retired {
		s.retired = true
		close(s.retiring)
	}
	if s.idle != nil {
		return s.idle
	}
	idle := make(chan struct{})
	if s.calls == 0 {
		close(idle)
	} else {
		s.idle = idle
	}
	return idle
}

// processEnded kills the session with why its stdio child ended (see
// process.onEnd), with the child's last stderr lines, unless the session
// has ended already.
func (s *session) processEnded(cause error) {
	if s.ctx.Err() != nil {
		return
	}
	s.die(s.proc.endErr(cause))
}
