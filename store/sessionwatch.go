package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sessionsChannel is the kind of the channel on which every write of a
// session announces the session's key (its HMAC, never its id).
const sessionsChannel = "sessions-changed"

// Timing of the announcements' subscription: a subscription that fails
// is made again after resubscribeWait; one that delivers nothing for
// receiveWait (it is pinged every pingInterval) is taken for dead.
const (
	resubscribeWait = 250 * time.Millisecond
	receiveWait     = 2 * time.Second
)

// sessionWatch keeps a sessionCache's subscription to the announcements
// of session writes: it delivers them to the cache, pings the
// subscription every pingInterval and tells the cache of each answer, and
// makes the subscription again after any failure (telling the cache,
// which drops its copies). Close stops it; it is idempotent.
type sessionWatch struct {
	r       *Redis
	cache   *sessionCache
	channel string

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu sync.Mutex
	ps *redis.PubSub // the current subscription, nil between two
}

func startSessionWatch(r *Redis, c *sessionCache) *sessionWatch {
	w := &sessionWatch{r: r, cache: c, channel: r.Key(sessionsChannel), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// run subscribes, and subscribes again after each failure, until Close.
func (w *sessionWatch) run() {
	defer close(w.done)
	for {
		w.subscription()
		w.cache.lost()
		t := time.NewTimer(resubscribeWait)
		select {
		case <-w.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// subscription runs one subscription until it fails or Close.
func (w *sessionWatch) subscription() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps := w.r.client.Subscribe(ctx, w.channel)
	w.mu.Lock()
	select {
	case <-w.stop:
		w.mu.Unlock()
		_ = ps.Close()
		return
	default:
	}
	w.ps = ps
	w.mu.Unlock()
	var pinger sync.WaitGroup
	pinger.Go(func() { w.ping(ctx, ps) })
	defer func() {
		w.mu.Lock()
		w.ps = nil
		w.mu.Unlock()
		_ = ps.Close() // ends ReceiveTimeout and ping
		cancel()
		pinger.Wait()
	}()
	for {
		m, err := ps.ReceiveTimeout(ctx, receiveWait)
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" || m.Channel != w.channel {
				return
			}
			w.cache.subscribedNow()
		case *redis.Message:
			w.cache.invalidate(m.Payload)
		case *redis.Pong:
			if sent, err := strconv.ParseInt(m.Payload, 10, 64); err == nil {
				w.cache.pong(time.Duration(sent))
			}
		}
	}
}

// ping pings ps every pingInterval with the time it sends the ping (since
// the cache's base), until ctx ends; a ping that cannot be sent closes ps,
// which ends the subscription.
func (w *sessionWatch) ping(ctx context.Context, ps *redis.PubSub) {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, OpTimeout)
		err := ps.Ping(pctx, strconv.FormatInt(int64(w.cache.since()), 10))
		cancel()
		if err != nil {
			_ = ps.Close()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sync waits until a ping sent after it began was answered: every
// announcement published before sync was called has then reached the
// cache.
func (w *sessionWatch) sync(ctx context.Context) error {
	start := w.cache.since()
	w.mu.Lock()
	ps := w.ps
	w.mu.Unlock()
	if ps != nil { // else the next subscription's pings answer
		_ = ps.Ping(ctx, strconv.FormatInt(int64(start), 10))
	}
	for {
		ok, next := w.cache.ackedSince(start)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: waiting for the sessions' announcements: %w", ctx.Err())
		case <-next:
		}
	}
}

// Close stops the subscription and waits for it.
func (w *sessionWatch) Close() {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		close(w.stop)
		if w.ps != nil {
			_ = w.ps.Close()
		}
		w.mu.Unlock()
		<-w.done
	})
}
