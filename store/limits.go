package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits keeps rate-limit buckets and max_concurrent slots in Redis
// (docs/agents.md#overrides-and-rate-limits), so that a limit holds across
// every replica: each operation is one Lua script, atomic in Redis, and
// counts with Redis's clock (TIME), not the replicas'. The scripts'
// writes are neither appended to the AOF nor sent to replicas
// (redis.set_repl(redis.REPL_NONE)): with appendfsync always each would
// wait for the disk, twice a call, and a counter lost in a restart or a
// failover only starts its limit over (docs/shared-state.md#durability).
// It is safe for concurrent use.
type Limits struct{ r *Redis }

// Limits is the rate-limit state of a Redis store, nil with the memory
// store (whose buckets stay in the process) and on a nil *Store.
func (s *Store) Limits() *Limits {
	if s == nil || s.redis == nil {
		return nil
	}
	return &Limits{r: s.redis}
}

// Bucket names one token bucket: Key (from BucketKey) holds up to Burst
// tokens, refilled at PerMinute a minute.
type Bucket struct {
	Key              string
	PerMinute, Burst int
}

// BucketKey is the key of a bucket: the kind of limit and the parts that
// identify it (a config name, the limit's figures), so that a limit a
// reload changes starts afresh and one it keeps keeps its tokens.
func (l *Limits) BucketKey(parts ...string) string { return l.r.Key("limit", parts...) }

// SlotsKey is the key of a server's max_concurrent leases.
func (l *Limits) SlotsKey(server string, max int) string {
	return l.r.Key("slots", server, strconv.Itoa(max))
}

// bucketSlack absorbs floating-point error in the refill, as the memory
// buckets do (ratelimit.Bucket).
const bucketSlack = 1e-9

// bucketsLua is the start of both bucket scripts, on the keys K and the
// arguments A (KEYS and ARGV, or a part of them: bucketsOf): Redis's
// clock, then A's slack and bucket count nb, and two functions over the
// first nb keys of K, whose refill rate (tokens a second) and capacity are
// A[1+2i] and A[2+2i] (bucketArgs). level(i) reads bucket i as
// refilled up to now: a bucket idle long enough to be full again has
// expired, and a missing bucket is a full one. put(i, have) stores bucket
// i with have tokens, to expire when it would be full again.
const bucketsLua = `
redis.set_repl(redis.REPL_NONE)
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local slack, nb = tonumber(A[1]), tonumber(A[2])
local tokens, rates, caps = {}, {}, {}
local function level(i)
  local rate, cap = tonumber(A[1 + 2*i]), tonumber(A[2 + 2*i])
  local v = redis.call('HMGET', K[i], 'tokens', 'last')
  local have, last = tonumber(v[1]), tonumber(v[2])
  if have == nil or last == nil then
    have = cap
  elseif now > last then
    have = math.min(cap, have + (now - last) * rate)
  end
  tokens[i], rates[i], caps[i] = have, rate, cap
  return have
end
local function put(i, have)
  redis.call('HSET', K[i], 'tokens', tostring(have), 'last', tostring(now))
  redis.call('PEXPIRE', K[i], math.ceil((caps[i] - have) / rates[i] * 1000) + 1000)
end
`

// bucketsOf makes KEYS and ARGV the K and A of bucketsLua.
const bucketsOf = `local K, A = KEYS, ARGV
`

// Take takes one token from every bucket, or from none: when one is
// short, refused is its index in buckets and wait how long until it has a
// token; refused is -1 when every bucket gave one.
func (l *Limits) Take(ctx context.Context, buckets []Bucket) (refused int, wait time.Duration, err error) {
	refused, wait, _, err = l.TakeWithSlot(ctx, buckets, nil)
	return refused, wait, err
}

// Slot names a max_concurrent lease to try for: one of Max slots under
// Key (SlotsKey), held for Lease (the call's timeout) under the name ID.
type Slot struct {
	Key   string
	Max   int
	Lease time.Duration
	ID    string
}

// TakeWithSlot is Take that, when every bucket gave a token and slot is
// not nil, also tries for the slot in the same script: one round trip
// before a call that has both kinds of limit. leased reports whether it
// got the slot (give it back with Release); when none was free the tokens
// stay taken and the caller waits for a slot with Acquire.
func (l *Limits) TakeWithSlot(ctx context.Context, buckets []Bucket, slot *Slot) (refused int, wait time.Duration, leased bool, err error) {
	keys, args, dropped := l.r.bucketArgs(buckets, slot)
	if len(keys) == 0 {
		return -1, 0, false, nil
	}
	var res TakeResult
	err = l.r.Run(ctx, "limit_take", func(ctx context.Context, c redisClient) error {
		v, err := takeScript.Run(ctx, c, keys, args...).Slice()
		if err != nil {
			return err
		}
		res, err = takeResult(v)
		return err
	})
	if err != nil {
		return -1, 0, false, err
	}
	l.r.rel.confirm(slot.keyOrEmpty(), dropped)
	return res.Refused, res.Wait, res.Leased, nil
}

// TakeResult is what a take gave: Refused is the index of the bucket that
// refused (-1: every bucket gave a token), Wait how long until it has one,
// Leased whether the slot was taken.
type TakeResult struct {
	Refused int
	Wait    time.Duration
	Leased  bool
}

// bucketArgs are the keys and arguments of takeScript for buckets and
// slot, and of giveScript for buckets (slot nil); with a slot, dropped is
// the leases of its key waiting to be given back on this replica, which
// takeScript drops first (confirm them once it ran).
func (r *Redis) bucketArgs(buckets []Bucket, slot *Slot) (keys []string, args []any, dropped []string) {
	if slot != nil {
		dropped = r.rel.pendingOf(slot.Key)
	}
	keys = make([]string, 0, len(buckets)+1)
	args = make([]any, 0, 2+2*len(buckets)+3+len(dropped))
	args = append(args, bucketSlack, len(buckets))
	for _, b := range buckets {
		keys = append(keys, b.Key)
		args = append(args, float64(max(b.PerMinute, 1))/60, max(b.Burst, 1))
	}
	if slot != nil {
		keys = append(keys, slot.Key)
		args = append(args, slot.Max, max64(slot.Lease.Milliseconds(), 1), slot.ID)
		for _, id := range dropped {
			args = append(args, id)
		}
	}
	return keys, args, dropped
}

// keyOrEmpty is the slot's key, "" for no slot.
func (s *Slot) keyOrEmpty() string {
	if s == nil {
		return ""
	}
	return s.Key
}

// takeResult reads takeScript's reply.
func takeResult(v []any) (TakeResult, error) {
	if len(v) != 3 {
		return TakeResult{}, fmt.Errorf("take script: %d values", len(v))
	}
	n, _ := v[0].(int64)
	s, _ := v[1].(string)
	got, _ := v[2].(int64)
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return TakeResult{}, fmt.Errorf("take script: wait %q: %w", s, err)
	}
	return TakeResult{Refused: int(n) - 1, Leased: got == 1,
		Wait: max(time.Duration(math.Round(secs*float64(time.Second))), time.Nanosecond)}, nil
}

// takeLua defines take(), which takes one token in each of the first nb
// buckets of K, all or none (bucketsLua, which it follows); when they all
// gave one and K has one more key, it then tries for a lease there as
// slotScript does. A is bucketArgs's: the slack, the bucket count, each
// bucket's rate and capacity, then the slot's count, lease (ms) and name,
// then the leases to drop from the slot first (given back on this
// replica, not yet sent). It returns the index of the bucket that refused
// (0: none), the seconds until it has a token, and 1 when it took the
// lease.
const takeLua = `
local function take()
  for j = 6 + 2*nb, #A do
    redis.call('ZREM', K[nb + 1], A[j])
  end
  for i = 1, nb do
    local have = level(i)
    if have < 1 - slack then
      return {i, tostring((1 - have) / rates[i]), 0}
    end
  end
  for i = 1, nb do
    put(i, math.max(0, tokens[i] - 1))
  end
  local leased = 0
  if #K > nb then
    local key, a = K[nb + 1], 3 + 2*nb
    local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local lease = tonumber(A[a + 1])
    redis.call('ZREMRANGEBYSCORE', key, '-inf', ms)
    if redis.call('ZCARD', key) < tonumber(A[a]) then
      redis.call('ZADD', key, ms + lease, A[a + 2])
      redis.call('PEXPIRE', key, lease + 1000)
      leased = 1
    end
  end
  return {0, '0', leased}
end
`

// takeScript is take() on KEYS and ARGV.
var takeScript = redis.NewScript(bucketsOf + bucketsLua + takeLua + `return take()`)

// giveScript gives back one token to each bucket of KEYS (bucketsLua),
// never above its capacity. ARGV is bucketArgs's without a slot.
var giveScript = redis.NewScript(bucketsOf + bucketsLua + `
for i = 1, nb do
  level(i)
end
for i = 1, nb do
  put(i, math.min(caps[i], tokens[i] + 1))
end
return 0
`)

// Give puts back one token in every bucket (never above its capacity): a
// call that took them and was not sent after all.
func (l *Limits) Give(ctx context.Context, buckets []Bucket) error {
	keys, args, _ := l.r.bucketArgs(buckets, nil)
	if len(keys) == 0 {
		return nil
	}
	return l.r.Run(ctx, "limit_give", func(ctx context.Context, c redisClient) error {
		return giveScript.Run(ctx, c, keys, args...).Err()
	})
}

// slotScript takes a lease on one of ARGV[1] slots of KEYS[1] for
// ARGV[2] ms under the name ARGV[3], after dropping expired leases (those
// of calls whose replica died) and the leases ARGV[4..] (given back on
// this replica, not yet sent); it returns 1 with the lease, 0 without.
var slotScript = redis.NewScript(`
redis.set_repl(redis.REPL_NONE)
for j = 4, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[j])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
redis.call('PEXPIRE', KEYS[1], lease + 1000)
return 1
`)

// slotPoll is how often a call waiting for a slot held on another replica
// asks again: Redis tells no replica when a slot frees, and a call waits at
// most its timeout anyway.
const slotPoll = 50 * time.Millisecond

// ErrNoSlot is Acquire's error when no slot came free before ctx ended.
var ErrNoSlot = errors.New("store: no max_concurrent slot came free in time")

// Acquire takes one of n slots under key (SlotsKey) as a lease of lease
// (the call's timeout: a replica that dies with the slot gives it back
// then), waiting while ctx lasts. It returns the lease's id for Release;
// ErrNoSlot (wrapping ctx's error) when ctx ended first, or an error
// wrapping ErrUnavailable.
func (l *Limits) Acquire(ctx context.Context, key string, n int, lease time.Duration, id string) error {
	ms := max64(lease.Milliseconds(), 1)
	for {
		var got int64
		dropped := l.r.rel.pendingOf(key)
		args := make([]any, 0, 3+len(dropped))
		args = append(args, n, ms, id)
		for _, d := range dropped {
			args = append(args, d)
		}
		err := l.r.Run(ctx, "slot_acquire", func(ctx context.Context, c redisClient) error {
			var err error
			got, err = slotScript.Run(ctx, c, []string{key}, args...).Int64()
			return err
		})
		if err == nil {
			l.r.rel.confirm(key, dropped)
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %w", ErrNoSlot, ctx.Err())
			}
			return err
		}
		if got == 1 {
			return nil
		}
		t := time.NewTimer(slotPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ErrNoSlot, ctx.Err())
		case <-t.C:
		}
	}
}

// Release gives back the lease id took under key (for lease) off the
// caller's path: it returns at once, and the release is sent in the
// background, with others waiting then in one round trip, and again while
// Redis does not take it, until the lease ends (releaser).
func (l *Limits) Release(key, id string, lease time.Duration) {
	l.r.rel.add(key, id, lease)
}

// Settle waits until every release Release queued was sent and taken, or
// ctx ends.
func (l *Limits) Settle(ctx context.Context) error { return l.r.rel.settle(ctx) }

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
