package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sessions keeps HTTP sessions in Redis (docs/shared-state.md), so that any
// replica serves a session another one made: each session is one hash of
// fields whose meaning is the caller's, stored under the HMAC of its id
// and expiring after the idle timeout without use. Every operation is one
// round trip. Reading a session refreshes its expiry only when less than
// the idle timeout is left, to idle + slack (idleSlack), in a write sent
// after the read: most requests write nothing, and on Redis with
// appendfsync always a write waits for the disk. A session thus expires
// between idle and idle + slack after its last use. It is safe for
// concurrent use.
type Sessions struct {
	r    *Redis
	keys *Keys
	idle time.Duration // 0: no expiry (sessions last until deleted)

	// names keeps the keys of the session ids used lately: an HMAC a
	// request is a few microseconds of CPU, on every request. Only the ids
	// of sessions that exist go in (made here, or found by a read), and a
	// read that finds none takes its id out: an id a client made up, of
	// any length up to the listener's header limit, is not kept, nor the
	// id of a session ended or expired meanwhile once it is asked for.
	namesMu sync.Mutex
	names   map[string]string
}

// maxNames bounds Sessions.names; when it is full, one entry makes room
// for the next, so more sessions than this in use keep most of their keys
// rather than the whole map being dropped every maxNames misses.
const maxNames = 4096

// Sessions is the session store of a Redis store whose sessions expire
// after idle without use (0: never), nil with the memory store and on a
// nil *Store.
func (s *Store) Sessions(idle time.Duration) *Sessions {
	if s == nil || s.redis == nil {
		return nil
	}
	return &Sessions{r: s.redis, keys: s.keys, idle: idle}
}

// key is the Redis key of session id, from names when it is there.
func (ss *Sessions) key(id string) string {
	ss.namesMu.Lock()
	k, ok := ss.names[id]
	ss.namesMu.Unlock()
	if ok {
		return k
	}
	return ss.r.Key("session", ss.keys.SessionID(id))
}

// remember keeps key as the key of session id, which exists (found is
// true), or forgets id (the session is not there).
func (ss *Sessions) remember(id, key string, found bool) {
	ss.namesMu.Lock()
	defer ss.namesMu.Unlock()
	if !found {
		delete(ss.names, id)
		return
	}
	if _, ok := ss.names[id]; ok {
		return
	}
	if ss.names == nil {
		ss.names = make(map[string]string)
	}
	if len(ss.names) >= maxNames {
		for other := range ss.names { // one entry out, the runtime's pick
			delete(ss.names, other)
			break
		}
	}
	ss.names[id] = key
}

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
			return nil
		})
		return err
	})
	if err == nil {
		ss.remember(id, key, true)
	}
	return err
}

// Load returns every field of session id and marks it used; ok is false
// when there is no such session (never made, deleted, or expired). The
// read is one pipeline of HGETALL and PTTL, which costs both sides less
// than a script; when the refresh of the expiry is due, it is sent after
// the read, off the caller's path (refresh).
func (ss *Sessions) Load(ctx context.Context, id string) (fields map[string]string, ok bool, err error) {
	key := ss.key(id)
	var ttl time.Duration
	err = ss.r.Run(ctx, "session_load", func(ctx context.Context, c redisClient) error {
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
		return nil, false, err
	}
	// PTTL is -1 without an expiry, -2 for no key (go-redis keeps those
	// as they are).
	if len(fields) > 0 && ss.idle > 0 && ttl >= -1 && ttl < ss.idle {
		ss.refresh(key)
	}
	ss.remember(id, key, len(fields) > 0)
	return fields, len(fields) > 0, nil
}

// refresh sets the expiry of the session under key to ss.expiry() in the
// background, which the store's Close waits for. PEXPIRE makes no key: a
// session deleted meanwhile stays deleted. A refresh that fails is tried
// again by the next read.
func (ss *Sessions) refresh(key string) {
	ss.r.background(func() {
		ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
		defer cancel()
		_ = ss.r.Run(ctx, "session_refresh", func(ctx context.Context, c redisClient) error {
			return c.PExpire(ctx, key, ss.expiry()).Err()
		})
	})
}

// LoadTaking is Load and Limits.TakeWithSlot in one round trip, one
// script: the read of the session a tools/call comes on, and the tokens
// and the max_concurrent lease of the call it is expected to be. The take
// happens whatever the read finds: a caller whose guess was wrong gives
// back what it took (Limits.Give, Limits.Release).
func (ss *Sessions) LoadTaking(ctx context.Context, id string, buckets []Bucket, slot *Slot) (fields map[string]string, ok bool, took TakeResult, err error) {
	tkeys, targs, dropped := ss.r.bucketArgs(buckets, slot)
	if len(tkeys) == 0 {
		fields, ok, err = ss.Load(ctx, id)
		return fields, ok, TakeResult{Refused: -1}, err
	}
	key := ss.key(id)
	keys := make([]string, 0, 1+len(tkeys))
	keys = append(keys, key)
	keys = append(keys, tkeys...)
	args := make([]any, 0, 2+len(targs))
	args = append(args, ss.idle.Milliseconds(), ss.expiry().Milliseconds())
	args = append(args, targs...)
	err = ss.r.Run(ctx, "session_load_limit_take", func(ctx context.Context, c redisClient) error {
		v, err := loadTakeScript.Run(ctx, c, keys, args...).Slice()
		if err != nil {
			return err
		}
		if len(v) != 4 {
			return fmt.Errorf("session load and take: %d values", len(v))
		}
		raw, _ := v[0].([]any)
		if fields, err = fieldsOf(raw); err != nil {
			return err
		}
		took, err = takeResult(v[1:])
		return err
	})
	if err != nil {
		return nil, false, TakeResult{}, err
	}
	ss.r.rel.confirm(slot.keyOrEmpty(), dropped)
	ss.remember(id, key, len(fields) > 0)
	return fields, len(fields) > 0, took, nil
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
// ARGV[3..]. It returns the session's fields, then takeScript's three
// values. The refresh is written to the AOF as any write; only the take's
// writes are kept out of it.
var loadTakeScript = redis.NewScript(`
local f = redis.call('HGETALL', KEYS[1])
local idle = tonumber(ARGV[1])
if #f > 0 and idle > 0 and redis.call('PTTL', KEYS[1]) < idle then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
local K, A = {}, {}
for i = 2, #KEYS do K[i - 1] = KEYS[i] end
for i = 3, #ARGV do A[i - 2] = ARGV[i] end
` + bucketsLua + takeLua + `
local r = take()
return {f, r[1], r[2], r[3]}
`)

// Set writes fields of session id (name, value, name, value...) and marks
// it used. A session that expired meanwhile is not brought back: the
// fields are written only when the session exists.
func (ss *Sessions) Set(ctx context.Context, id string, pairs ...string) error {
	if len(pairs) == 0 {
		return nil
	}
	key := ss.key(id)
	args := make([]any, 0, len(pairs)+1)
	args = append(args, ss.expiry().Milliseconds())
	for _, p := range pairs {
		args = append(args, p)
	}
	return ss.r.Run(ctx, "session_set", func(ctx context.Context, c redisClient) error {
		return setIfExists.Run(ctx, c, []string{key}, args...).Err()
	})
}

// setIfExists writes ARGV[2..] as field/value pairs of KEYS[1] when it
// exists, and sets its expiry to ARGV[1] ms (0: none).
var setIfExists = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
local idle = tonumber(ARGV[1])
if idle > 0 then
  redis.call('PEXPIRE', KEYS[1], idle)
end
return 1
`)

// Delete ends session id on every replica.
func (ss *Sessions) Delete(ctx context.Context, id string) error {
	key := ss.key(id)
	ss.remember(id, key, false)
	return ss.r.Run(ctx, "session_delete", func(ctx context.Context, c redisClient) error {
		return c.Del(ctx, key).Err()
	})
}
