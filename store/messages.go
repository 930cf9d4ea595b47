package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/internal/randid"
)

// Messages between replicas (docs/shared-state.md#messages-between-replicas).
//
// Some things cannot move between replicas: a client's open stream, and a
// call running upstream. What must reach them travels as a message to the
// replica that has them. Every replica has an inbox, a Redis stream of its
// own ("inbox:<replica>"), which it reads with XREAD BLOCK from the last
// entry it saw: an entry written while the replica is reconnecting waits
// there and is read once the connection is back, which pub/sub would drop.
// Nothing grows without bound: each XADD trims the stream to about
// inboxMaxLen entries, the reader deletes what it has read, each entry
// carries an expiry after which it is skipped, and the stream itself
// expires inboxTTL after its last write (the inbox of a replica that was
// killed disappears on its own).
//
// A replica also keeps a liveness key ("replica:<id>") that it renews every
// aliveRenew and that expires aliveTTL after the last renewal: one that
// waits on another (a retry forwarded to the replica holding the call)
// checks it, and stops waiting with an error when the other is gone,
// rather than hang. A holder key ("holder:<kind>:<target>") names the
// replica that holds something others send messages to (a session's
// stream); it expires unless renewed.

// Inbox parameters.
const (
	inboxMaxLen = 1000
	inboxTTL    = 5 * time.Minute
	// EntryTTL is how long a message stays good: one not read by then is
	// dropped (its sender has given up on it, or it is stale).
	EntryTTL   = 30 * time.Second
	readBlock  = 400 * time.Millisecond // below OpTimeout, so a read is one Run
	readCount  = 64
	aliveTTL   = 3 * time.Second
	aliveRenew = time.Second
	// HoldTTL is how long a holder key lasts unless renewed; holders renew
	// it every HoldTTL/3.
	HoldTTL = 30 * time.Second
	// retryMin and retryMax bound the wait after a read that failed.
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// Message is one message between replicas. Its fields mean what the
// sender and receiver agree on; Target is a digest (Keys.Digest), never
// raw text a client sent.
type Message struct {
	Kind   string // what it is ("notify", "answer", ...)
	Target string // what it is for, on the receiver (a session's digest)
	From   string // the sending replica
	Corr   string // correlates a reply with its request; "" when none
	Body   []byte
}

// Messages is this replica's inbox and its way to the others'. Its methods
// are safe for concurrent use.
type Messages struct {
	r      *Redis
	self   string
	handle func(Message)

	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once
}

// Messages starts this replica's inbox on a Redis store: handle gets each
// message sent to it, in order, on one goroutine (it must not block). It
// is nil with the memory store and on a nil *Store. Close stops it.
func (s *Store) Messages(handle func(Message)) *Messages {
	if s == nil || s.redis == nil {
		return nil
	}
	m := &Messages{r: s.redis, self: randid.Hex(12), handle: handle, stop: make(chan struct{})}
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	// The first liveness key is set before the replica can hold a stream or
	// a parked call: another replica that finds it named as a holder must
	// not take it for dead in the moment before its first beat.
	m.renew()
	m.done.Add(2)
	go m.read()
	go m.beat()
	return m
}

// Self is this replica's id: random, new at every start.
func (m *Messages) Self() string { return m.self }

func (m *Messages) inbox(replica string) string { return m.r.Key("inbox", replica) }
func (m *Messages) alive(replica string) string { return m.r.Key("replica", replica) }
func (m *Messages) holder(kind, target string) string {
	return m.r.Key("holder", kind, target)
}

// Send appends msg to the inbox of replica.
func (m *Messages) Send(ctx context.Context, replica string, msg Message) error {
	key := m.inbox(replica)
	values := map[string]any{
		"k": msg.Kind, "t": msg.Target, "f": m.self, "c": msg.Corr, "b": msg.Body,
		"x": strconv.FormatInt(time.Now().Add(EntryTTL).UnixMilli(), 10),
	}
	return m.r.Run(ctx, "inbox_send", func(ctx context.Context, c redisClient) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: inboxMaxLen, Approx: true, Values: values})
			p.PExpire(ctx, key, inboxTTL)
			return nil
		})
		return err
	})
}

// Alive reports whether replica renewed its liveness key within aliveTTL.
func (m *Messages) Alive(ctx context.Context, replica string) (bool, error) {
	var n int64
	err := m.r.Run(ctx, "replica_alive", func(ctx context.Context, c redisClient) error {
		var err error
		n, err = c.Exists(ctx, m.alive(replica)).Result()
		return err
	})
	return n > 0, err
}

// Hold records this replica as the holder of target (of kind) for
// HoldTTL; call it again to renew.
func (m *Messages) Hold(ctx context.Context, kind, target string) error {
	return m.r.Run(ctx, "holder_set", func(ctx context.Context, c redisClient) error {
		return c.Set(ctx, m.holder(kind, target), m.self, HoldTTL).Err()
	})
}

// Release forgets this replica as the holder of target, unless another
// has taken it since.
func (m *Messages) Release(ctx context.Context, kind, target string) error {
	return m.r.Run(ctx, "holder_release", func(ctx context.Context, c redisClient) error {
		return releaseHolderScript.Run(ctx, c, []string{m.holder(kind, target)}, m.self).Err()
	})
}

// releaseHolderScript deletes KEYS[1] when it still names ARGV[1].
var releaseHolderScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Holder is the replica holding target (of kind); ok is false when none
// does.
func (m *Messages) Holder(ctx context.Context, kind, target string) (replica string, ok bool, err error) {
	err = m.r.Run(ctx, "holder_get", func(ctx context.Context, c redisClient) error {
		var err error
		replica, err = c.Get(ctx, m.holder(kind, target)).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return replica, err == nil, err
}

// read delivers the inbox's entries to handle until Close.
func (m *Messages) read() {
	defer m.done.Done()
	key, last, wait := m.inbox(m.self), "0", retryMin
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		var streams []redis.XStream
		err := m.r.Run(context.Background(), "inbox_read", func(ctx context.Context, c redisClient) error {
			var err error
			streams, err = c.XRead(ctx, &redis.XReadArgs{Streams: []string{key, last}, Count: readCount, Block: readBlock}).Result()
			return err
		})
		switch {
		case errors.Is(err, redis.Nil):
			wait = retryMin
			continue
		case err != nil:
			select {
			case <-m.stop:
				return
			case <-time.After(wait):
			}
			wait = min(wait*2, retryMax)
			continue
		}
		wait = retryMin
		now := time.Now().UnixMilli()
		for _, s := range streams {
			for _, e := range s.Messages {
				last = e.ID
				if exp, err := strconv.ParseInt(str(e.Values["x"]), 10, 64); err != nil || exp < now {
					continue
				}
				m.handle(Message{Kind: str(e.Values["k"]), Target: str(e.Values["t"]), From: str(e.Values["f"]),
					Corr: str(e.Values["c"]), Body: []byte(str(e.Values["b"]))})
			}
		}
		// What was read is not needed again: trim it (the last entry stays,
		// as the place to read on from).
		_ = m.r.Run(context.Background(), "inbox_trim", func(ctx context.Context, c redisClient) error {
			return c.XTrimMinID(ctx, key, last).Err()
		})
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// renew sets this replica's liveness key for aliveTTL.
func (m *Messages) renew() {
	_ = m.r.Run(context.Background(), "replica_alive", func(ctx context.Context, c redisClient) error {
		return c.Set(ctx, m.alive(m.self), "1", aliveTTL).Err()
	})
}

// beat renews the liveness key until Close, then removes it.
func (m *Messages) beat() {
	defer m.done.Done()
	t := time.NewTicker(aliveRenew)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			_ = m.r.Run(context.Background(), "replica_gone", func(ctx context.Context, c redisClient) error {
				return c.Del(ctx, m.alive(m.self), m.inbox(m.self)).Err()
			})
			return
		case <-t.C:
			m.renew()
		}
	}
}

// Close stops reading and tells the others this replica is gone. It is
// idempotent and does nothing on a nil *Messages.
func (m *Messages) Close() {
	if m == nil {
		return
	}
	m.closeOnce.Do(func() {
		close(m.stop)
		m.done.Wait()
	})
}
