package store

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// probeInterval is how often an idle Redis store is pinged, so that
// mcp_proxy_store_up follows the store between requests.
const probeInterval = 5 * time.Second

// Options are what Open needs besides the config. The zero value is valid.
type Options struct {
	// Metrics records the store's operations; nil records nothing.
	Metrics *metrics.Store
	// Logger tells when the store stops or starts answering.
	Logger zerolog.Logger
}

// Store is the state shared by replicas (docs/shared-state.md). Its
// methods are safe for concurrent use; Close is idempotent.
type Store struct {
	typ   string
	keys  *Keys
	redis *Redis // nil with the memory store

	log       zerolog.Logger
	metrics   *metrics.Store
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu   sync.Mutex
	msgs []*Messages // inboxes to close before the client
	// sessions is the replica's copy of the sessions and its
	// subscription, made by the first Sessions (sessions.go).
	sessions      *sessionCache
	sessionsWatch *sessionWatch
	closed        bool // Close began
}

// sessionCache is the store's copy of the sessions, made and subscribed
// on first use.
func (s *Store) sessionCache() (*sessionCache, *sessionWatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions == nil {
		s.sessions = newSessionCache()
		s.sessionsWatch = startSessionWatch(s.redis, s.sessions)
		if s.closed {
			s.sessionsWatch.Close() // nothing is served from the copy then
		}
	}
	return s.sessions, s.sessionsWatch
}

// Open builds the store cfg describes (validated by config). The memory
// store draws its keys at random for this process. A Redis store derives
// them from store.encryption_key and does not dial yet: it connects on
// the first operation, and again by itself after a drop; Ready tells
// whether it answers.
func Open(cfg config.Store, opts Options) (*Store, error) {
	s := &Store{typ: cfg.Type, log: opts.Logger, metrics: opts.Metrics}
	if cfg.Type != config.StoreRedis {
		var err error
		if s.keys, err = randomKeys(); err != nil {
			return nil, err
		}
		s.typ = config.StoreMemory
		opts.Metrics.Up(true)
		return s, nil
	}
	master, err := config.DecodeStoreKey(cfg.EncryptionKey)
	if err != nil {
		return nil, err
	}
	if s.keys, err = deriveKeys(master); err != nil {
		return nil, err
	}
	if s.redis, err = newRedis(cfg, opts.Metrics); err != nil {
		return nil, err
	}
	s.redis.rel = newReleaser(s.redis, opts.Logger)
	// go-redis logs to stderr on its own (failed dials, for one); its lines
	// go through the proxy's log instead, at debug level: the probe says
	// once, at error level, that the store does not answer.
	redis.SetLogger(redisLog{opts.Logger.With().Str("component", "go-redis").Logger()})
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.probe()
	return s, nil
}

// redisLog is go-redis's logger on zerolog.
type redisLog struct{ log zerolog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Msgf(format, v...)
}

// Type is config.StoreMemory or config.StoreRedis.
func (s *Store) Type() string { return s.typ }

// Shared reports whether the state is shared with other processes (a
// Redis store). When it is not, each kind of state stays in the package
// that uses it. A nil *Store is not shared.
func (s *Store) Shared() bool { return s != nil && s.redis != nil }

// Keys are the store's keys (derived, or random for this process).
func (s *Store) Keys() *Keys { return s.keys }

// Redis is the client of a Redis store, nil with the memory store.
func (s *Store) Redis() *Redis { return s.redis }

// Ready returns nil when the store answers (the memory store always does),
// else an error wrapping ErrUnavailable. It waits at most OpTimeout.
func (s *Store) Ready(ctx context.Context) error {
	if s.redis == nil {
		return nil
	}
	return s.redis.ping(ctx)
}

func (r *Redis) ping(ctx context.Context) error {
	return r.Run(ctx, "ping", func(ctx context.Context, c redisClient) error {
		return c.Ping(ctx).Err()
	})
}

// probe pings the store every probeInterval until Close, and logs when it
// stops or starts answering.
func (s *Store) probe() {
	defer close(s.done)
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	up := true
	check := func() {
		err := s.redis.ping(context.Background())
		switch {
		case err != nil && up:
			s.log.Error().Err(err).Msg("the shared-state store does not answer; requests that need it fail until it does")
		case err == nil && !up:
			s.log.Info().Msg("the shared-state store answers again")
		}
		up = err == nil
	}
	check()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			check()
		}
	}
}

// Close stops the probe and closes the connections. It is idempotent, and
// does nothing on a nil *Store.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		if s.redis == nil {
			return
		}
		s.mu.Lock()
		msgs, watch := s.msgs, s.sessionsWatch
		s.closed = true
		s.mu.Unlock()
		for _, m := range msgs {
			m.Close()
		}
		if watch != nil {
			watch.Close()
		}
		close(s.stop)
		<-s.done
		s.closeErr = s.redis.Close()
	})
	return s.closeErr
}
