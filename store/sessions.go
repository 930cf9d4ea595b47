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
// and expiring after the idle timeout without use. Every operation is one
// round trip. Reading a session refreshes its expiry only when less than
// the idle timeout is left, to idle + slack (idleSlack): most requests then
// write nothing, and on Redis with appendfsync always a write waits for the
// disk. A session thus expires between idle and idle + slack after its
// last use. It is safe for concurrent use.
type Sessions struct {
	r    *Redis
	keys *Keys
	idle time.Duration // 0: no expiry (sessions last until deleted)
}

// Sessions is the session store of a Redis store whose sessions expire
// after idle without use (0: never), nil with the memory store and on a
// nil *Store.
func (s *Store) Sessions(idle time.Duration) *Sessions {
	if s == nil || s.redis == nil {
		return nil
	}
	return &Sessions{r: s.redis, keys: s.keys, idle: idle}
}

func (ss *Sessions) key(id string) string { return ss.r.Key("session", ss.keys.SessionID(id)) }

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
	return ss.r.Run(ctx, "session_create", func(ctx context.Context, c redisClient) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			p.HSet(ctx, key, fields)
			ss.touch(ctx, p, key)
			return nil
		})
		return err
	})
}

// Load returns every field of session id and marks it used; ok is false
// when there is no such session (never made, deleted, or expired).
func (ss *Sessions) Load(ctx context.Context, id string) (fields map[string]string, ok bool, err error) {
	key := ss.key(id)
	err = ss.r.Run(ctx, "session_load", func(ctx context.Context, c redisClient) error {
		v, err := loadScript.Run(ctx, c, []string{key}, ss.idle.Milliseconds(), ss.expiry().Milliseconds()).StringSlice()
		if err != nil {
			return err
		}
		if len(v)%2 != 0 {
			return fmt.Errorf("session load: %d values", len(v))
		}
		fields = make(map[string]string, len(v)/2)
		for i := 0; i < len(v); i += 2 {
			fields[v[i]] = v[i+1]
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return fields, len(fields) > 0, nil
}

// LoadTaking is Load and Limits.TakeWithSlot in one pipelined round trip:
// the read of the session a tools/call comes on, and the tokens and the
// max_concurrent lease of the call it is expected to be. The take happens
// whatever the read finds: a caller whose guess was wrong gives back what
// it took (Limits.Give, Limits.Release). A script Redis does not have yet
// is sent again by itself.
func (ss *Sessions) LoadTaking(ctx context.Context, id string, buckets []Bucket, slot *Slot) (fields map[string]string, ok bool, took TakeResult, err error) {
	keys, args := bucketArgs(buckets, slot)
	if len(keys) == 0 {
		fields, ok, err = ss.Load(ctx, id)
		return fields, ok, TakeResult{Refused: -1}, err
	}
	key := ss.key(id)
	loadArgs := []any{ss.idle.Milliseconds(), ss.expiry().Milliseconds()}
	var raw []string
	err = ss.r.Run(ctx, "session_load_limit_take", func(ctx context.Context, c redisClient) error {
		var load, take *redis.Cmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			load = loadScript.EvalSha(ctx, p, []string{key}, loadArgs...)
			take = takeScript.EvalSha(ctx, p, keys, args...)
			return nil
		})
		if err != nil && !isNoScript(err) {
			return err
		}
		if isNoScript(load.Err()) {
			load = loadScript.Run(ctx, c, []string{key}, loadArgs...)
		}
		if isNoScript(take.Err()) {
			take = takeScript.Run(ctx, c, keys, args...)
		}
		if raw, err = load.StringSlice(); err != nil {
			return err
		}
		v, err := take.Slice()
		if err != nil {
			return err
		}
		took, err = takeResult(v)
		return err
	})
	if err != nil {
		return nil, false, TakeResult{}, err
	}
	if len(raw)%2 != 0 {
		return nil, false, TakeResult{}, fmt.Errorf("session load: %d values", len(raw))
	}
	fields = make(map[string]string, len(raw)/2)
	for i := 0; i < len(raw); i += 2 {
		fields[raw[i]] = raw[i+1]
	}
	return fields, len(fields) > 0, took, nil
}

// isNoScript reports whether err is Redis's answer to a script it does not
// have in its cache.
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// loadScript returns every field of KEYS[1] and, when it exists with less
// than ARGV[1] ms to live (and ARGV[1] > 0), sets its expiry to ARGV[2] ms.
// A read that refreshes nothing writes nothing (scripts replicate their
// effects), so it costs no append-only-file write.
var loadScript = redis.NewScript(`
local f = redis.call('HGETALL', KEYS[1])
local idle = tonumber(ARGV[1])
if #f > 0 and idle > 0 and redis.call('PTTL', KEYS[1]) < idle then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
return f
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
	return ss.r.Run(ctx, "session_delete", func(ctx context.Context, c redisClient) error {
		return c.Del(ctx, key).Err()
	})
}
