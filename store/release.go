package store

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// A max_concurrent lease is given back off the call's path: the call's
// answer does not wait for the round trip (docs/shared-state.md). releaser
// keeps every lease whose release Redis has not confirmed yet, and sends
// them all in one script releaseLinger after one is queued; while Redis
// does not take them it tries again (retryFirst, doubling up to
// retryLast) until each lease's own end, when Redis drops it anyway. The
// next take of a slot on this replica drops the leases of that slot still
// waiting here, in its own script (pendingOf): a client that sends its
// next call once it has the answer never finds its own last lease held,
// and a busy replica's releases mostly cost no round trip of their own.
// While Redis does not take them the queue is bounded: a lease that has
// ended is dropped (Redis dropped it too), and past maxPendingReleases the
// oldest are dropped, their slots held in Redis until their leases end.
type releaser struct {
	r   *Redis
	log zerolog.Logger

	mu      sync.Mutex
	pending map[string]map[string]time.Time // slots key -> lease id -> when the lease ends (local clock)
	count   int                             // leases in pending
	order   []queuedRelease                 // pending's leases, oldest first, and some already gone
	dropped int                             // leases dropped over the cap since the last warning
	settled *sync.Cond                      // broadcast when pending empties
	started bool
	closed  bool

	wake chan struct{} // one pending signal: something was queued
	stop chan struct{}
	done chan struct{}
}

// Retries of releases Redis did not take, and how long a release waits
// before it is sent, for the next take on the replica to carry it.
const (
	retryFirst    = 50 * time.Millisecond
	retryLast     = time.Second
	releaseLinger = 5 * time.Millisecond
)

// maxPendingReleases is how many releases a replica keeps waiting for
// Redis at most (docs/shared-state.md, the rate limits); past it
// the oldest are dropped, and their slots stay taken until their leases
// end.
const maxPendingReleases = 4096

// queuedRelease is one lease in the order releases were queued; it is
// still waiting while pending holds it with the same end.
type queuedRelease struct {
	key, id string
	end     time.Time
}

func newReleaser(r *Redis, log zerolog.Logger) *releaser {
	rl := &releaser{r: r, log: log, pending: map[string]map[string]time.Time{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	rl.settled = sync.NewCond(&rl.mu)
	return rl
}

// add queues the release of lease id under key, which ends after lease
// from now at the latest.
func (rl *releaser) add(key, id string, lease time.Duration) {
	rl.mu.Lock()
	if rl.closed {
		rl.mu.Unlock()
		// After Close: one try, on the caller's path.
		_ = rl.send(context.Background(), map[string][]string{key: {id}})
		return
	}
	ids := rl.pending[key]
	if ids == nil {
		ids = map[string]time.Time{}
		rl.pending[key] = ids
	}
	end := time.Now().Add(lease)
	if _, ok := ids[id]; !ok {
		rl.count++
	}
	ids[id] = end
	rl.order = append(rl.order, queuedRelease{key: key, id: id, end: end})
	rl.trim()
	if !rl.started {
		rl.started = true
		go rl.run()
	}
	rl.mu.Unlock()
	select {
	case rl.wake <- struct{}{}:
	default:
	}
}

// trim drops the oldest leases while more than maxPendingReleases wait,
// and compacts order once most of it is gone; rl.mu is held.
func (rl *releaser) trim() {
	var over map[string][]string
	n := 0
	for rl.count-n > maxPendingReleases && len(rl.order) > 0 {
		q := rl.order[0]
		rl.order = rl.order[1:]
		if end, ok := rl.pending[q.key][q.id]; ok && end.Equal(q.end) {
			if over == nil {
				over = map[string][]string{}
			}
			over[q.key] = append(over[q.key], q.id)
			n++
		}
	}
	if n > 0 {
		rl.forget(over)
		if rl.dropped == 0 {
			rl.log.Warn().Int("max", maxPendingReleases).Msg("too many max_concurrent slots wait to be given back; the oldest are dropped and stay taken until their leases end")
		}
		rl.dropped += n
	}
	if len(rl.order) > 64 && len(rl.order) > 2*rl.count {
		live := make([]queuedRelease, 0, rl.count)
		for _, q := range rl.order {
			if end, ok := rl.pending[q.key][q.id]; ok && end.Equal(q.end) {
				live = append(live, q)
			}
		}
		rl.order = live
	}
}

// pendingOf is the leases of key still waiting to be given back; those
// whose lease has ended are forgotten (Redis dropped them by then).
func (rl *releaser) pendingOf(key string) []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	ids := rl.pending[key]
	if len(ids) == 0 {
		return nil
	}
	now := time.Now()
	out := make([]string, 0, len(ids))
	var ended []string
	for id, end := range ids {
		if now.After(end) {
			ended = append(ended, id)
			continue
		}
		out = append(out, id)
	}
	if ended != nil {
		rl.forget(map[string][]string{key: ended})
	}
	return out
}

// confirm forgets the leases of key that Redis dropped.
func (rl *releaser) confirm(key string, ids []string) {
	if len(ids) == 0 {
		return
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.forget(map[string][]string{key: ids})
}

// forget drops the given leases from pending; rl.mu is held.
func (rl *releaser) forget(done map[string][]string) {
	for key, ids := range done {
		m := rl.pending[key]
		for _, id := range ids {
			if _, ok := m[id]; ok {
				delete(m, id)
				rl.count--
			}
		}
		if len(m) == 0 {
			delete(rl.pending, key)
		}
	}
	if len(rl.pending) == 0 {
		rl.order = rl.order[:0]
		rl.settled.Broadcast()
	}
}

// batch is every pending lease whose lease has not ended; those that have
// are forgotten (Redis dropped them by then).
func (rl *releaser) batch(now time.Time) map[string][]string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	out := make(map[string][]string, len(rl.pending))
	var ended map[string][]string
	for key, ids := range rl.pending {
		for id, end := range ids {
			if now.After(end) {
				if ended == nil {
					ended = map[string][]string{}
				}
				ended[key] = append(ended[key], id)
				continue
			}
			out[key] = append(out[key], id)
		}
	}
	if ended != nil {
		rl.forget(ended)
	}
	return out
}

// run sends what is queued until stop, then what is left, once.
func (rl *releaser) run() {
	defer close(rl.done)
	wait := time.Duration(0)
	failing := false
	var retry <-chan time.Time
	for {
		select {
		case <-rl.wake:
		case <-retry:
		case <-rl.stop:
			if b := rl.batch(time.Now()); len(b) > 0 && rl.send(context.Background(), b) == nil {
				rl.mu.Lock()
				rl.forget(b)
				rl.mu.Unlock()
			}
			return
		}
		retry = nil
		if !failing {
			// A client that calls again on this replica within the
			// linger takes the slot with this release in the same
			// script, and nothing is left to send.
			select {
			case <-time.After(releaseLinger):
			case <-rl.stop:
			}
		}
		b := rl.batch(time.Now())
		if len(b) == 0 {
			continue
		}
		err := rl.send(context.Background(), b)
		if err == nil {
			rl.mu.Lock()
			rl.forget(b)
			rl.mu.Unlock()
			if failing {
				rl.log.Info().Msg("the max_concurrent slots waiting to be given back were given back")
			}
			rl.mu.Lock()
			if rl.dropped > 0 {
				rl.log.Warn().Int("dropped", rl.dropped).Msg("max_concurrent slots were dropped from the queue of those to give back; they stayed taken until their leases ended")
				rl.dropped = 0
			}
			rl.mu.Unlock()
			wait, failing = 0, false
			continue
		}
		if !failing {
			rl.log.Warn().Str("error", sanitize.Error(err.Error())).Msg("max_concurrent slots were not given back yet; trying again until their leases end")
		}
		failing = true
		wait = min(max(2*wait, retryFirst), retryLast)
		retry = time.After(wait)
	}
}

// send gives back the leases of b in one round trip.
func (rl *releaser) send(ctx context.Context, b map[string][]string) error {
	keys := make([]string, 0, len(b))
	args := make([]any, 0, len(b))
	for key, ids := range b {
		for _, id := range ids {
			keys = append(keys, key)
			args = append(args, id)
		}
	}
	return rl.r.Run(ctx, "slot_release", func(ctx context.Context, c redisClient) error {
		return releaseScript.Run(ctx, c, keys, args...).Err()
	})
}

// settle waits until no release is waiting, or ctx ends.
func (rl *releaser) settle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		rl.mu.Lock()
		rl.settled.Broadcast()
		rl.mu.Unlock()
	})
	defer stop()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for len(rl.pending) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		rl.settled.Wait()
	}
	return nil
}

// close sends what is still waiting, once, and stops.
func (rl *releaser) close() {
	rl.mu.Lock()
	started := rl.started
	rl.closed = true
	rl.mu.Unlock()
	if started {
		close(rl.stop)
		<-rl.done
	}
}

// releaseScript drops, for each i, the lease ARGV[i] of KEYS[i].
var releaseScript = redis.NewScript(`
redis.set_repl(redis.REPL_NONE)
local n = 0
for i, key in ipairs(KEYS) do
  n = n + redis.call('ZREM', key, ARGV[i])
end
return n
`)
