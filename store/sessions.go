package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sessions keeps HTTP sessions in Redis (docs/shared-state.md), so that any
// replica serves a session another one made: each session is one hash of
// fields whose meaning is the caller's, stored under the HMAC of its id
// and expiring after the idle timeout without use. Every operation in
// Redis is one round trip, and a read of a session whose copy on this
// replica is current (sessionCache) costs none. Every write of a session
// announces its key to every replica in the same atomic step, and each
// drops its copy. Reading a session refreshes its expiry only when less
// than the idle timeout is left, to idle + slack (idleSlack), in a write
// sent after the read: most requests write nothing, and on Redis with
// appendfsync always a write waits for the disk. A session thus expires
// between idle and idle + slack after its last use. It is safe for
// concurrent use.
type Sessions struct {
	r     *Redis
	keys  *Keys
	idle  time.Duration // 0: no expiry (sessions last until deleted)
	cache *sessionCache
	watch *sessionWatch
}

// Session is a session as Load, Reload or LoadTaking read it.
type Session struct {
	// Fields are the session's fields, empty when there is no such
	// session (never made, deleted, or expired). The caller must not
	// modify them: they may be this replica's copy.
	Fields map[string]string
	// Copy is true when Fields come from this replica's copy rather than
	// from Redis: a write made on another replica may not be in them yet
	// (it is, once its announcement arrived).
	Copy bool
}

// Found reports whether the session exists.
func (s Session) Found() bool { return len(s.Fields) > 0 }

// Sessions is the session store of a Redis store whose sessions expire
// after idle without use (0: never), nil with the memory store and on a
// nil *Store. Every Sessions of a Store shares its copy of the sessions.
func (s *Store) Sessions(idle time.Duration) *Sessions {
	if s == nil || s.redis == nil {
		return nil
	}
	c, w := s.sessionCache()
	return &Sessions{r: s.redis, keys: s.keys, idle: idle, cache: c, watch: w}
}

// key is the Redis key of session id, from the cache when it is there.
func (ss *Sessions) key(id string) string {
	if k := ss.cache.keyOf(id); k != "" {
		return k
	}
	return ss.r.Key("session", ss.keys.SessionID(id))
}

// announce publishes key on the sessions' channel in p, after a write to
// it in the same transaction.
func (ss *Sessions) announce(ctx context.Context, p redis.Pipeliner, key string) {
	p.Publish(ctx, ss.watch.channel, key)
}

// Sync waits until every write of a session announced before it was
// called has reached this replica's copy (tests, and a caller that must
// see a write just made elsewhere through the copy).
func (ss *Sessions) Sync(ctx context.Context) error { return ss.watch.sync(ctx) }

// maxIdleSlack bounds idleSlack: with it a read refreshes a busy
// session's expiry at most once a minute.
const maxIdleSlack = time.Minute

// idleSlack is how long past the idle timeout a session's expiry is set
// when it is refreshed: a tenth of it, at most maxIdleSlack.
func idleSlack(idle time.Duration) time.Duration { return min(idle/10, maxIdleSlack) }

// expiry is the expiry a write or a refresh sets (0: none).
func (ss *Sessions) expiry() time.Duration {
	if ss.idle <= 0 {
		return 0
	}
	return ss.idle + idleSlack(ss.idle)
}

// touch sets the expiry of key in p.
func (ss *Sessions) touch(ctx context.Context, p redis.Pipeliner, key string) {
	if ss.idle > 0 {
		p.PExpire(ctx, key, ss.expiry())
	}
}

// Create records a new session with its first fields.
func (ss *Sessions) Create(ctx context.Context, id string, fields map[string]string) error {
	key := ss.key(id)
	err := ss.r.Run(ctx, "session_create", func(ctx context.Context, c redisClient) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			p.HSet(ctx, key, fields)
			ss.touch(ctx, p, key)
			ss.announce(ctx, p, key)
			return nil
		})
		return err
	})
	if err == nil {
		ss.cache.remember(id, key)
	}
	return err
}

// Load returns session id and marks it used: from this replica's copy
// when it is current, else from Redis (Reload). A session used only
// through the copy has its expiry refreshed all the same (see Sessions),
// in the background.
func (ss *Sessions) Load(ctx context.Context, id string) (Session, error) {
	if fields, key, refresh := ss.cache.get(id, ss.idle); fields != nil {
		if refresh {
			ss.refresh(id, key)
		}
		return Session{Fields: fields, Copy: true}, nil
	}
	return ss.Reload(ctx, id)
}

// Reload is Load from Redis, whatever the copy holds; what it reads
// becomes the copy. The read is one pipeline of HGETALL and PTTL, which
// costs both sides less than a script; when the refresh of the expiry is
// due, it is sent after the read, off the caller's path (refresh).
func (ss *Sessions) Reload(ctx context.Context, id string) (Session, error) {
	key := ss.key(id)
	ticket := ss.cache.begin(id)
	sent := time.Now()
	var fields map[string]string
	var ttl time.Duration
	err := ss.r.Run(ctx, "session_load", func(ctx context.Context, c redisClient) error {
		var all *redis.MapStringStringCmd
		var left *redis.DurationCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			all = p.HGetAll(ctx, key)
			left = p.PTTL(ctx, key)
			return nil
		})
		if err != nil {
			return err
		}
		fields, ttl = all.Val(), left.Val()
		return nil
	})
	if err != nil {
		return Session{}, err
	}
	ss.cache.fill(ticket, id, key, fields, expiresAt(sent, ttl))
	// PTTL is -1 without an expiry, -2 for no key (go-redis keeps those
	// as they are).
	if len(fields) > 0 && ss.idle > 0 && ttl >= -1 && ttl < ss.idle {
		ss.refresh(id, key)
	}
	return Session{Fields: fields}, nil
}

// expiresAt is when a key whose PTTL, read by a request sent at sent, was
// ttl expires at the latest; zero for none (ttl < 0).
func expiresAt(sent time.Time, ttl time.Duration) time.Time {
	if ttl < 0 {
		return time.Time{}
	}
	return sent.Add(ttl)
}

// refresh sets the expiry of session id under key to ss.expiry() in the
// background, which the store's Close waits for, and tells the copy.
// PEXPIRE makes no key: a session deleted meanwhile stays deleted, and
// its copy goes. A refresh that fails is tried again by the next read.
func (ss *Sessions) refresh(id, key string) {
	ss.r.background(func() {
		ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
		defer cancel()
		sent := time.Now()
		var found bool
		err := ss.r.Run(ctx, "session_refresh", func(ctx context.Context, c redisClient) error {
			var err error
			found, err = c.PExpire(ctx, key, ss.expiry()).Result()
			return err
		})
		ss.cache.refreshed(id, found, sent.Add(ss.expiry()), err)
	})
}

// LoadTaking is Load and Limits.TakeWithSlot in one round trip: the read
// of the session a tools/call comes on, and the tokens and the
// max_concurrent lease of the call it is expected to be. When the copy of
// the session is current, the round trip is the take alone; else the
// read and the take are one script. The take happens whatever the read
// finds: a caller whose guess was wrong gives back what it took
// (Limits.Give, Limits.Release).
func (ss *Sessions) LoadTaking(ctx context.Context, id string, buckets []Bucket, slot *Slot) (Session, TakeResult, error) {
	tkeys, targs, dropped := ss.r.bucketArgs(buckets, slot)
	if len(tkeys) == 0 {
		sess, err := ss.Load(ctx, id)
		return sess, TakeResult{Refused: -1}, err
	}
	if fields, key, refresh := ss.cache.get(id, ss.idle); fields != nil {
		var took TakeResult
		err := ss.r.Run(ctx, "limit_take", func(ctx context.Context, c redisClient) error {
			v, err := takeScript.Run(ctx, c, tkeys, targs...).Slice()
			if err != nil {
				return err
			}
			took, err = takeResult(v)
			return err
		})
		if err != nil {
			return Session{}, TakeResult{}, err
		}
		ss.r.rel.confirm(slot.keyOrEmpty(), dropped)
		if refresh {
			ss.refresh(id, key)
		}
		return Session{Fields: fields, Copy: true}, took, nil
	}
	key := ss.key(id)
	keys := make([]string, 0, 1+len(tkeys))
	keys = append(keys, key)
	keys = append(keys, tkeys...)
	args := make([]any, 0, 2+len(targs))
	args = append(args, ss.idle.Milliseconds(), ss.expiry().Milliseconds())
	args = append(args, targs...)
	ticket := ss.cache.begin(id)
	sent := time.Now()
	var fields map[string]string
	var ttl time.Duration
	var took TakeResult
	err := ss.r.Run(ctx, "session_load_limit_take", func(ctx context.Context, c redisClient) error {
		v, err := loadTakeScript.Run(ctx, c, keys, args...).Slice()
		if err != nil {
			return err
		}
		if len(v) != 5 {
			return fmt.Errorf("session load and take: %d values", len(v))
		}
		raw, _ := v[0].([]any)
		if fields, err = fieldsOf(raw); err != nil {
			return err
		}
		ms, _ := v[1].(int64)
		ttl = time.Duration(ms) * time.Millisecond
		if ms < 0 {
			ttl = time.Duration(ms) // -1 or -2, as PTTL's reply in go-redis
		}
		took, err = takeResult(v[2:])
		return err
	})
	if err != nil {
		return Session{}, TakeResult{}, err
	}
	ss.r.rel.confirm(slot.keyOrEmpty(), dropped)
	ss.cache.fill(ticket, id, key, fields, expiresAt(sent, ttl))
	return Session{Fields: fields}, took, nil
}

// fieldsOf reads a hash's fields from HGETALL's reply, a list of names and
// values.
func fieldsOf(raw []any) (map[string]string, error) {
	if len(raw)%2 != 0 {
		return nil, fmt.Errorf("session load: %d values", len(raw))
	}
	fields := make(map[string]string, len(raw)/2)
	for i := 0; i < len(raw); i += 2 {
		k, _ := raw[i].(string)
		v, _ := raw[i+1].(string)
		fields[k] = v
	}
	return fields, nil
}

// loadTakeScript reads the session KEYS[1] as Load does and, when it
// exists with less than ARGV[1] ms to live (and ARGV[1] > 0), sets its
// expiry to ARGV[2] ms; then it runs takeScript on the other keys with
// ARGV[3..]. It returns the session's fields, its time to live then (ms,
// as PTTL), then takeScript's three values. The refresh is written to the
// AOF as any write; only the take's writes are kept out of it. A refresh
// changes no field, and is not announced.
var loadTakeScript = redis.NewScript(`
local f = redis.call('HGETALL', KEYS[1])
local idle = tonumber(ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if #f > 0 and idle > 0 and ttl < idle then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  ttl = tonumber(ARGV[2])
end
local K, A = {}, {}
for i = 2, #KEYS do K[i - 1] = KEYS[i] end
for i = 3, #ARGV do A[i - 2] = ARGV[i] end
` + bucketsLua + takeLua + `
local r = take()
return {f, ttl, r[1], r[2], r[3]}
`)

// Set writes fields of session id (name, value, name, value...) and marks
// it used. A session that expired meanwhile is not brought back: the
// fields are written only when the session exists. The write is
// announced, and this replica's copy of the session goes too, whatever
// came of it: the next read takes what Redis holds.
func (ss *Sessions) Set(ctx context.Context, id string, pairs ...string) error {
	if len(pairs) == 0 {
		return nil
	}
	key := ss.key(id)
	args := make([]any, 0, len(pairs)+2)
	args = append(args, ss.expiry().Milliseconds(), ss.watch.channel)
	for _, p := range pairs {
		args = append(args, p)
	}
	defer ss.cache.invalidate(key)
	return ss.r.Run(ctx, "session_set", func(ctx context.Context, c redisClient) error {
		return setIfExists.Run(ctx, c, []string{key}, args...).Err()
	})
}

// setIfExists writes ARGV[3..] as field/value pairs of KEYS[1] when it
// exists, sets its expiry to ARGV[1] ms (0: none), and publishes the key
// on the channel ARGV[2].
var setIfExists = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
local idle = tonumber(ARGV[1])
if idle > 0 then
  redis.call('PEXPIRE', KEYS[1], idle)
end
redis.call('PUBLISH', ARGV[2], KEYS[1])
return 1
`)

// Delete ends session id on every replica: the deletion is announced with
// it, and each replica drops its copy when the announcement arrives.
func (ss *Sessions) Delete(ctx context.Context, id string) error {
	key := ss.key(id)
	ss.cache.forget(id)
	// A read in flight may keep a copy until the announcement arrives.
	defer ss.cache.forget(id)
	return ss.r.Run(ctx, "session_delete", func(ctx context.Context, c redisClient) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			ss.announce(ctx, p, key)
			return nil
		})
		return err
	})
}
