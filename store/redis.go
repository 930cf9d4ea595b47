package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// Timeouts of the Redis client. A request that needs the store fails
// within 1 s when the store does not answer (docs/shared-state.md): one
// operation gets OpTimeout, which leaves the rest of the second for the
// error to reach the client; dialling, reading and writing are bounded
// below it so that a dead connection is noticed within one operation.
const (
	OpTimeout      = 750 * time.Millisecond
	dialTimeout    = 500 * time.Millisecond
	ioTimeout      = 500 * time.Millisecond
	poolTimeout    = 500 * time.Millisecond
	minRetryWait   = 10 * time.Millisecond
	maxRetryWait   = 100 * time.Millisecond
	redisRetries   = 1
	sentinelSuffix = " (sentinel)"
)

// Redis is the instrumented client of a Redis store: the kinds of state
// kept in Redis are built on it. It is safe for concurrent use.
type Redis struct {
	client  redis.UniversalClient
	prefix  string
	metrics *metrics.Store
	// where names the server in errors: its address, never its password.
	where string
	// rel gives max_concurrent leases back off the calls' path.
	rel *releaser
}

// newRedis builds the client of cfg (type redis, validated). It does not
// dial: go-redis connects on the first operation and again after a drop.
func newRedis(cfg config.Store, m *metrics.Store) (*Redis, error) {
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		// go-redis's parse errors may quote the URL, password included.
		return nil, errors.New("store.url: not a redis:// or rediss:// URL go-redis accepts")
	}
	if opt.TLSConfig != nil && cfg.TLSCACertPath != "" {
		pool, err := caPool(cfg.TLSCACertPath)
		if err != nil {
			return nil, err
		}
		opt.TLSConfig.RootCAs = pool
	}
	if opt.TLSConfig != nil {
		opt.TLSConfig.MinVersion = tls.VersionTLS12
	}
	r := &Redis{prefix: cfg.KeyPrefix, metrics: m}
	if s := cfg.Sentinel; s != nil {
		r.where = strings.Join(s.Addrs, ",") + sentinelSuffix
		r.client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            s.Master,
			SentinelAddrs:         s.Addrs,
			Username:              opt.Username,
			Password:              opt.Password,
			DB:                    opt.DB,
			TLSConfig:             opt.TLSConfig,
			DialTimeout:           dialTimeout,
			ReadTimeout:           ioTimeout,
			WriteTimeout:          ioTimeout,
			PoolTimeout:           poolTimeout,
			ContextTimeoutEnabled: true,
			MaxRetries:            redisRetries,
			MinRetryBackoff:       minRetryWait,
			MaxRetryBackoff:       maxRetryWait,
			Protocol:              protocol(opt.Protocol),
			DisableIdentity:       true,
		})
		return r, nil
	}
	r.where = opt.Addr
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = dialTimeout, ioTimeout, ioTimeout, poolTimeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries, opt.MinRetryBackoff, opt.MaxRetryBackoff = redisRetries, minRetryWait, maxRetryWait
	opt.Protocol, opt.DisableIdentity = protocol(opt.Protocol), true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	r.client = redis.NewClient(opt)
	return r, nil
}

// protocol is the RESP version of the client: 2 unless the URL asks for
// another (?protocol=3). The store uses none of RESP3's additions (push
// messages, client-side caching), and on RESP3 go-redis looks for push
// messages around every command, which costs a few microseconds of CPU
// each time.
func protocol(fromURL int) int {
	if fromURL != 0 {
		return fromURL
	}
	return 2
}

// caPool is the system's roots plus the PEM certificates of path.
func caPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("store.tls_ca_cert_path: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("store.tls_ca_cert_path: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// Client is the go-redis client, for operations Run wraps. Keys must come
// from Key.
func (r *Redis) Client() redis.UniversalClient { return r.client }

// Key is the name of a key: store.key_prefix, the kind of state, then the
// parts, joined by ":" ("mcp-proxy:session:<hmac>"). Parts that come from
// a client must be fixed-length digests (Keys.SessionID), never raw text.
func (r *Redis) Key(kind string, parts ...string) string {
	n := len(r.prefix) + len(kind)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(r.prefix)
	b.WriteString(kind)
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// Run runs one operation of the store, named op in the metrics (a fixed
// name, never a key): f gets a context bounded by OpTimeout and the
// client. A reply of redis.Nil (no such key) is returned as it is and
// counts as an answer. When the store does not answer (no connection, a
// timeout, a server still loading its data or without a master) the error
// wraps ErrUnavailable; when the caller's ctx ended first it wraps that
// context's error instead.
func (r *Redis) Run(ctx context.Context, op string, f func(ctx context.Context, c redisClient) error) error {
	octx, cancel := context.WithTimeout(ctx, OpTimeout)
	defer cancel()
	start := time.Now()
	err := f(octx, r.client)
	took := time.Since(start)
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		r.metrics.Request(op, metrics.StoreOK, took)
		r.metrics.Up(true)
		return err
	case ctx.Err() != nil:
		r.metrics.Request(op, metrics.StoreError, took)
		return fmt.Errorf("store %s: %w", op, ctx.Err())
	case answered(err):
		r.metrics.Request(op, metrics.StoreError, took)
		r.metrics.Up(true)
		return fmt.Errorf("store %s: %w", op, err)
	default:
		r.metrics.Request(op, metrics.StoreUnavailable, took)
		r.metrics.Up(false)
		return &unavailableError{op: op, where: r.where, err: err}
	}
}

// answered reports whether err is a reply of a working server (a script
// error, a wrong type), as opposed to no reply or a server that cannot
// serve yet.
func answered(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "BUSY"} {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return true
}

// unavailableError is ErrUnavailable with the operation, the server's
// address and the cause.
type unavailableError struct {
	op, where string
	err       error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("%v at %s (%s): %v", ErrUnavailable, e.where, e.op, e.err)
}

// Unwrap is ErrUnavailable alone: the cause (often a context deadline) is
// text, so that no caller mistakes it for the end of its own request.
func (e *unavailableError) Unwrap() error { return ErrUnavailable }

// Close sends the lease releases still waiting, once, and closes the
// client's connections.
func (r *Redis) Close() error {
	if r.rel != nil {
		r.rel.close()
	}
	return r.client.Close()
}

// redisClient is go-redis's client of one endpoint or of a Sentinel
// master.
type redisClient = redis.UniversalClient
