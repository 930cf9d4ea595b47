package upstream

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
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
	// LookupEnv reads one variable of the proxy's environment; it defaults to
	// os.LookupEnv. It builds a stdio child's filtered environment.
	LookupEnv func(string) (string, bool)
	// Environ lists the proxy's environment; it defaults to os.Environ. It
	// provides XDG_* variables, and everything with inherit_env.
	Environ func() []string
}

// Conn is the proxy's connection to one upstream MCP server. All methods are
// safe for concurrent use.
type Conn struct {
	cfg  *config.Server
	name string
	opts Options
	log  zerolog.Logger

	snap atomic.Pointer[Snapshot]
	ids  atomic.Uint64 // request ids px-<n>

	ready     chan struct{}
	readyOnce sync.Once

	mu      sync.Mutex // guards everything below, and orders publishes
	started bool
	closed  bool
	cancel  context.CancelFunc
	sess    *session // the live session while StateConnected, else nil
	gen     uint64
	events  *dispatcher // nil until Start

	wg sync.WaitGroup // the run goroutine
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
		ready: make(chan struct{}),
	}
	c.snap.Store(&Snapshot{Server: cfg.Name, State: StateConnecting})
	return c
}

// Name returns the configured server name.
func (c *Conn) Name() string { return c.name }

// Start connects in the background and returns at once. The first attempt
// (transport, initialize and first discovery) is bounded by connect_timeout;
// Ready is closed when it ends. ctx is the lifetime of the connection: when
// it ends the Conn shuts down as if Close had been called (but Close must
// still be called to wait for it). A second Start, or a Start after Close,
// does nothing.
func (c *Conn) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return
	}
	c.started = true
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
// failed, or when the Conn is closed.
func (c *Conn) Ready() <-chan struct{} { return c.ready }

// Close shuts the connection down: the live session is torn down (stdio:
// stdin closed, 2 s, SIGTERM to the process group, 3 s, SIGKILL), StateClosed
// is published, and Close returns once every goroutine the Conn started has
// ended. It is idempotent, safe before Start and after a partial start, and
// bounded (about 7 s for a stdio child that ignores everything).
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
	return nil
}

// run owns the connection for the lifetime ctx: it connects once and
// supervises the session until it dies or ctx ends. Reconnection with backoff
// is meant to wrap connect here.
func (c *Conn) run(ctx context.Context) {
	defer c.markReady()
	s, err := c.connect(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn().Err(safe(err)).Msg("connect failed")
			c.publishFailed(nil, err)
			c.markReady()
			<-ctx.Done()
		}
		c.publishClosed()
		return
	}
	if !c.publishConnected(s, s.initial) {
		c.publishClosed()
		s.close()
		return
	}
	s.initial = nil
	c.log.Info().Str("protocol", s.protocol).Int("tools", len(c.Snapshot().Tools)).Msg("connected")
	c.markReady()
	s.startBackground()
	select {
	case <-s.dead:
		err := s.deathErr()
		c.log.Warn().Err(err).Msg("connection lost")
		c.publishFailed(s, err)
		s.close()
		<-ctx.Done()
		c.publishClosed()
	case <-ctx.Done():
		c.publishClosed()
		s.close()
	}
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
	c.gen++
	next.Generation = c.gen
	c.snap.Store(&next)
	if c.events != nil {
		c.events.push(&next)
	}
	return &next
}

// publishConnected makes s the live session and publishes its catalog.
// It reports false (and publishes nothing) if the Conn is closing.
func (c *Conn) publishConnected(s *session, cat *catalog) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.sess = s
	c.publishLocked(func(snap *Snapshot) {
		*snap = Snapshot{
			State:           StateConnected,
			Capabilities:    s.caps,
			ServerInfo:      s.serverInfo,
			Instructions:    s.instructions,
			ProtocolVersion: s.protocol,
		}
		cat.apply(snap)
	})
	return true
}

// publishCatalog publishes a re-discovered part of s's catalog, if s is
// still the live session.
func (c *Conn) publishCatalog(s *session, cat *catalog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != s || c.closed {
		return
	}
	c.publishLocked(cat.apply)
}

// publishFailed publishes StateFailed with err (sanitized). If s is not nil
// it stops being the live session first.
func (c *Conn) publishFailed(s *session, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != nil && c.sess == s {
		c.sess = nil
	}
	c.publishLocked(func(snap *Snapshot) {
		*snap = Snapshot{State: StateFailed, Err: safe(err)}
	})
}

// publishClosed publishes StateClosed and forgets the live session.
func (c *Conn) publishClosed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess = nil
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
