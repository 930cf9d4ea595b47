package upstream

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
	"github.com/mcp-proxy/mcp-proxy/tracing"
	"github.com/rs/zerolog"
)

// Options are the hooks and dependencies of a Conn. The zero value is usable:
// nil hooks are not called, nil lookups default to the process environment.
type Options struct {
	// Logger is the parent logger; the Conn logs through a child that carries
	// server=<name>. The zero Logger discards everything.
	Logger zerolog.Logger
	// OnSnapshot is called after every state or catalog change with the new
	// snapshot, in Generation order. It is called from a goroutine of the
	// Conn, never concurrently for one Conn and never while the Conn holds a
	// lock, so it may call Snapshot or Request. It must not block long and
	// must not call Close.
	OnSnapshot func(*Snapshot)
	// OnNotification gets every notification of the upstream except the
	// list_changed ones, which the Conn handles itself. params is nil when
	// the notification had none. It runs on a goroutine of the Conn (in
	// arrival order) and must not block.
	OnNotification func(server, method string, params json.RawMessage)
	// OnRequest answers the upstream's requests to the client
	// (sampling/createMessage, elicitation/create, roots/list). With it set
	// the connection advertises the sampling, elicitation and roots
	// capabilities, on every transport. ctx is the request's: over
	// Streamable HTTP, a request that arrives on the stream of a call
	// derives from that call's context; it ends when the session does.
	// params are the bytes the server sent (nil when it sent none), without
	// line breaks between tokens, so they fit one line; a request naming a
	// member twice (in its envelope, params or params._meta) is refused
	// before it gets here. The result goes to the server as its bytes, in
	// the reply; a returned *RPCError is sent with its code, message and
	// data. nil = not advertised: those requests get method not found.
	OnRequest func(ctx context.Context, server, method string, params json.RawMessage) (json.RawMessage, error)
	// LookupEnv reads one variable of the proxy's environment; it defaults to
	// os.LookupEnv. It builds a stdio child's filtered environment.
	LookupEnv func(string) (string, bool)
	// Environ lists the proxy's environment; it defaults to os.Environ. It
	// provides XDG_* variables, and everything with inherit_env.
	Environ func() []string
	// Backoff returns the wait before reconnect attempt n, where n = 1 is
	// the first attempt after a dropped connection or a failed first
	// connection. nil is the documented schedule (docs/operations.md#reconnection): 1 s doubled per attempt (1, 2,
	// 4, 8, 16 s), capped at 60 s, jittered by ±20 %. After 5 failed
	// reconnect attempts the server is parked whatever Backoff says. A
	// negative wait counts as 0.
	Backoff func(n int) time.Duration
	// ProbeInterval is the wait between the connect attempts (probes) of a
	// parked server; 0 or less means 300 s.
	ProbeInterval time.Duration
	// StallTimeout is how long a write to a stdio server's stdin may take
	// no byte before the server counts as hung (its connection drops and
	// reconnects); 0 or less means 30 s.
	StallTimeout time.Duration
	// Tracer, when not nil, gives every request a client span, child of the
	// span in the request's ctx, and sends the span's context upstream in
	// params._meta.traceparent/tracestate and, to HTTP and SSE servers, in
	// the traceparent/tracestate headers. nil is tracing off: requests go
	// as they came.
	Tracer *tracing.Tracer
	// Auth configures OAuth authorization (auth.go).
	Auth AuthOptions
	// StartupDeadline bounds how long requests wait for the first
	// connection (the proxy's start plus startup_wait, docs/operations.md#startup); zero means
	// Start plus config.DefaultStartupWait. A deadline already past when
	// Start is called means requests never wait for the first connection.
	StartupDeadline time.Time
	// OnWait is called once for every request that found no live session
	// and waited for one (wait.go), when its wait ends: outcome is one of
	// WaitSent, WaitTimeout, WaitCanceled, WaitFailed, WaitOverflow (which
	// did not wait: waited is 0). It runs on the request's goroutine and
	// must not block.
	OnWait func(outcome string, waited time.Duration)
}

// Conn is the proxy's connection to one upstream MCP server. All methods are
// safe for concurrent use.
type Conn struct {
	cfg   *config.Server
	name  string
	opts  Options
	log   zerolog.Logger
	sched schedule

	// auth is the token client of an oauth or client_credentials server,
	// nil otherwise; authErr is why it could not be built (a key file),
	// which every connect attempt reports.
	auth    *oauthclient.Client
	authErr error

	// notifyMu makes OnNotification calls of an outgoing and an incoming
	// session (HTTP session renewal) never overlap.
	notifyMu sync.Mutex

	snap atomic.Pointer[Snapshot]
	ids  atomic.Uint64 // request ids px-<n>
	era  eraMemo       // the protocol era the handshakes found
	subs subscriptions // resources subscribed to, in the 2026-07-28 era (listen.go)
	// invalidTools names the tools of the last tools/list left out for an
	// invalid x-mcp-header declaration: they are never called.
	invalidTools atomic.Pointer[map[string]bool]
	peer         peer // for client spans; zero when tracing is off

	ready     chan struct{}
	readyOnce sync.Once

	// levelMu guards level and every session's levelSent, and is held while
	// a level is sent, so sends never overlap (loglevel.go).
	levelMu sync.Mutex
	level   string // set by SetLogLevel; "" for none

	mu      sync.Mutex // guards everything below, and orders publishes
	started bool
	closed  bool
	cancel  context.CancelFunc
	sess    *session // the live session while StateConnected, else nil
	gen     uint64
	// announced counts the list_changed announcements whose re-discovery
	// was published, per list (Snapshot.ToolsAnnounced and the others).
	announced Announced
	events    *dispatcher // nil until Start
	// window is the end of the reconnect window after a drop (zero when
	// none is open); windowTimer publishes its end.
	window      time.Time
	windowTimer *time.Timer

	waits waitQueue // requests waiting for a connection (wait.go)

	wg sync.WaitGroup // the run goroutine, session teardowns, the window timer
}

// New returns a Conn for cfg, in StateConnecting. It starts nothing; call
// Start. cfg must have had its defaults applied and must not be modified
// afterwards.
func New(cfg *config.Server, opts Options) *Conn {
	c := &Conn{
		cfg:   cfg,
		name:  cfg.Name,
		opts:  opts,
		log:   opts.Logger.With().Str("server", cfg.Name).Logger(),
		sched: scheduleOf(opts),
		ready: make(chan struct{}),
	}
	if opts.Tracer != nil {
		c.peer = peerOf(cfg, c.transportKind())
	}
	c.snap.Store(&Snapshot{Server: cfg.Name, State: StateConnecting})
	c.auth, c.authErr = newAuthClient(cfg, opts)
	return c
}

// Name returns the configured server name.
func (c *Conn) Name() string { return c.name }

// Start connects in the background and returns at once. Every attempt
// (transport, initialize and first discovery) is bounded by connect_timeout;
// Ready is closed when the first one ends. A failed first attempt, and a
// connection that drops later, are retried on the reconnect schedule (see
// Options.Backoff) until one connects or the Conn is closed. ctx is the
// lifetime of the connection: when it ends the Conn shuts down as if Close
// had been called (but Close must still be called to wait for it). A second
// Start, or a Start after Close, does nothing.
func (c *Conn) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return
	}
	c.started = true
	deadline := c.opts.StartupDeadline
	if deadline.IsZero() {
		deadline = time.Now().Add(config.DefaultStartupWait)
	}
	if time.Now().Before(deadline) {
		// Not a publish: the first one comes when the attempt ends.
		c.snap.Store(&Snapshot{Server: c.name, State: StateConnecting, StartupUntil: deadline})
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.events = newDispatcher(c.opts.OnSnapshot)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(ctx)
	}()
}

// Snapshot returns the latest published snapshot (StateConnecting before the
// first one). It never returns nil and never blocks.
func (c *Conn) Snapshot() *Snapshot { return c.snap.Load() }

// Ready is closed once the first connect attempt has ended, connected or
// failed, or when the Conn is closed. Reconnect attempts do not reopen it.
func (c *Conn) Ready() <-chan struct{} { return c.ready }

// Close shuts the connection down: a wait for the next attempt ends at
// once, an attempt under way is abandoned, the live session is torn down
// (stdio: stdin closed, 2 s, SIGTERM to the process group, 3 s, SIGKILL),
// StateClosed is published, and Close returns once every goroutine the Conn
// started has ended, including the teardown of earlier sessions and
// attempts. It is idempotent, safe before Start and after a partial start,
// and bounded (about 7 s for a stdio child that ignores everything).
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closed = true
	cancel, events, started := c.cancel, c.events, c.started
	c.mu.Unlock()

	if started {
		cancel()
		c.wg.Wait() // run publishes StateClosed on its way out
		events.stop()
	} else {
		snap := c.publish(func(s *Snapshot) { *s = Snapshot{Server: c.name, State: StateClosed} })
		if c.opts.OnSnapshot != nil {
			c.opts.OnSnapshot(snap)
		}
	}
	c.markReady()
	if c.auth != nil {
		c.auth.Close()
	}
	return nil
}

func (c *Conn) markReady() { c.readyOnce.Do(func() { close(c.ready) }) }

// current returns the live session, or nil.
func (c *Conn) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// publish builds the next snapshot from the current one under c.mu, stores
// it, and queues it for OnSnapshot, so Generation order is delivery order.
func (c *Conn) publish(mutate func(*Snapshot)) *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.publishLocked(mutate)
}

func (c *Conn) publishLocked(mutate func(*Snapshot)) *Snapshot {
	next := *c.snap.Load()
	mutate(&next)
	next.Server = c.name
	next.Announced = c.announced
	c.gen++
	next.Generation = c.gen
	c.snap.Store(&next)
	if c.events != nil {
		c.events.push(&next)
	}
	c.waits.wakeAll()
	return &next
}

// publishConnected makes s, a new connection, the live session and
// publishes its catalog. It reports false (and publishes nothing) if the
// Conn is closing.
func (c *Conn) publishConnected(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.sess = s
	c.closeWindowLocked()
	next := connectedSnapshot(s, s.initial)
	c.publishLocked(func(snap *Snapshot) { *snap = next })
	return true
}

// replaceSession makes s, the re-initialized successor of the expired HTTP
// session old, the live session. Its snapshot is published only if it
// differs from the current one (a server may come back with other tools).
// It reports false if the Conn is closing or old is no longer live.
func (c *Conn) replaceSession(old, s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.sess != old {
		return false
	}
	c.sess = s
	if next := connectedSnapshot(s, s.initial); !sameSnapshot(c.snap.Load(), &next) {
		c.publishLocked(func(snap *Snapshot) { *snap = next })
	}
	return true
}

// connectedSnapshot is the StateConnected snapshot of s with catalog cat.
func connectedSnapshot(s *session, cat *catalog) Snapshot {
	snap := Snapshot{
		State:           StateConnected,
		Capabilities:    s.caps,
		ServerInfo:      s.serverInfo,
		Instructions:    s.instructions,
		ProtocolVersion: s.protocol,
	}
	cat.apply(&snap)
	return snap
}

// publishCatalog publishes a re-discovered part of s's catalog, if s is
// still the live session and the catalog changed, or the upstream
// announced a change of the lists in announced (list_changed): then it
// counts the announcement (Snapshot.Announced) and publishes even an
// unchanged catalog, so that clients hear of it.
func (c *Conn) publishCatalog(s *session, cat *catalog, announced kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != s || c.closed {
		return
	}
	next := *c.snap.Load()
	cat.apply(&next)
	if announced == 0 && sameSnapshot(c.snap.Load(), &next) {
		return
	}
	c.announced.count(announced)
	c.publishLocked(func(snap *Snapshot) { *snap = next })
}

// publishConnecting publishes StateConnecting for reconnect attempt n,
// keeping the error of the attempt before (and, within the reconnect
// window, the catalog).
func (c *Conn) publishConnecting(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.publishLocked(func(snap *Snapshot) {
		*snap = c.downSnapshotLocked(snap, Snapshot{State: StateConnecting, Err: snap.Err, Attempt: n})
	})
}

// publishDown publishes StateFailed, or StateParked, with err (sanitized),
// the attempt that failed and when the next one starts. If s is not nil it
// stops being the live session first: the connection dropped, which opens
// the reconnect window (reconnect_wait), during which requests wait and
// the catalog stays published. Without a window they fail at once with
// ErrNotConnected.
func (c *Conn) publishDown(s *session, err error, attempt int, next time.Time, parked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != nil && c.sess == s {
		c.sess = nil
	}
	if c.closed {
		return // StateClosed follows at once
	}
	state := StateFailed
	switch {
	case parked:
		state = StateParked
		c.closeWindowLocked()
	case s != nil:
		if rw := c.reconnectWait(); rw > 0 {
			c.openWindowLocked(time.Now().Add(rw))
		}
	}
	c.publishLocked(func(snap *Snapshot) {
		*snap = c.downSnapshotLocked(snap, Snapshot{State: state, Err: safe(err), Attempt: attempt, NextRetry: next})
	})
}

// downSnapshotLocked completes next, a snapshot of a server that is down:
// within the reconnect window it keeps the catalog of cur (the connection
// that dropped) and the window's end.
func (c *Conn) downSnapshotLocked(cur *Snapshot, next Snapshot) Snapshot {
	if c.window.IsZero() || !time.Now().Before(c.window) {
		return next
	}
	next.ReconnectUntil = c.window
	next.Tools, next.Resources, next.ResourceTemplates, next.Prompts = cur.Tools, cur.Resources, cur.ResourceTemplates, cur.Prompts
	next.Capabilities, next.ServerInfo, next.Instructions, next.ProtocolVersion = cur.Capabilities, cur.ServerInfo, cur.Instructions, cur.ProtocolVersion
	return next
}

// openWindowLocked opens a reconnect window that ends at until; a timer
// publishes its end.
func (c *Conn) openWindowLocked(until time.Time) {
	c.closeWindowLocked()
	c.window = until
	c.wg.Add(1)
	c.windowTimer = time.AfterFunc(time.Until(until), func() {
		defer c.wg.Done()
		c.expireWindow(until)
	})
}

// closeWindowLocked closes the reconnect window, if one is open.
func (c *Conn) closeWindowLocked() {
	c.window = time.Time{}
	if c.windowTimer != nil && c.windowTimer.Stop() {
		c.wg.Done() // the timer's function will not run
	}
	c.windowTimer = nil
}

// expireWindow ends the reconnect window that ends at until, if it is still
// open: the server is still down, so its catalog goes (its tools leave
// tools/list) and waiting requests fail.
func (c *Conn) expireWindow(until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.window.Equal(until) {
		return
	}
	c.window, c.windowTimer = time.Time{}, nil
	if cur := c.snap.Load(); cur.ReconnectUntil.Equal(until) {
		c.publishLocked(func(snap *Snapshot) {
			*snap = Snapshot{State: cur.State, Err: cur.Err, Attempt: cur.Attempt, NextRetry: cur.NextRetry}
		})
	}
}

// publishClosed publishes StateClosed and forgets the live session.
func (c *Conn) publishClosed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess = nil
	c.closeWindowLocked()
	c.publishLocked(func(snap *Snapshot) { *snap = Snapshot{State: StateClosed} })
}

// connectTimeout bounds one connect attempt: transport, initialize and first
// discovery.
func (c *Conn) connectTimeout() time.Duration {
	if d := c.cfg.ConnectTimeout.D(); d > 0 {
		return d
	}
	return config.DefaultConnectTimeout // defaults not applied
}

// requestTimeout is the server's per-request timeout.
func (c *Conn) requestTimeout() time.Duration {
	if d := c.cfg.Timeout.D(); d > 0 {
		return d
	}
	return config.DefaultTimeout // defaults not applied
}
