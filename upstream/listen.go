package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// In the 2026-07-28 era there is neither a GET stream nor
// resources/subscribe: the server's notifications that belong to no request
// come on a subscriptions/listen request the client keeps open, naming what
// it wants (MCP 2026-07-28, basic: subscriptions). The proxy keeps one open
// per live session, reopened like the GET stream of the session era, and
// turns resources/subscribe and resources/unsubscribe into changes of its
// resource list.

// subscriptions is the set of resource URIs the proxy's clients subscribed
// to on one Conn, kept across reconnects. Safe for concurrent use.
type subscriptions struct {
	mu   sync.Mutex
	uris []string
	// changed (buffered, one) wakes the listen loop to reopen the stream
	// with the new set.
	changed chan struct{}
}

func (u *subscriptions) wake() chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.changed == nil {
		u.changed = make(chan struct{}, 1)
	}
	return u.changed
}

// update adds or removes uri; it reports whether the set changed.
func (u *subscriptions) update(uri string, add bool) bool {
	u.mu.Lock()
	i := slices.Index(u.uris, uri)
	switch {
	case add && i < 0:
		u.uris = append(u.uris, uri)
	case !add && i >= 0:
		u.uris = slices.Delete(u.uris, i, i+1)
	default:
		u.mu.Unlock()
		return false
	}
	u.mu.Unlock()
	select {
	case u.wake() <- struct{}{}:
	default:
	}
	return true
}

func (u *subscriptions) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.uris)
}

// subscribe handles resources/subscribe and resources/unsubscribe for a
// session of the 2026-07-28 era: the URI joins or leaves the listen
// stream's resource list, and the answer is the empty result the session
// era's server would give.
func (c *Conn) subscribe(method string, params json.RawMessage) (json.RawMessage, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return nil, c.opError(method, errors.Join(ErrBadRequest, errors.New("params.uri must be a non-empty string")))
	}
	c.subs.update(p.URI, method == string(mcp.MethodResourcesSubscribe))
	return json.RawMessage(`{}`), nil
}

// listenFilter is what the listen stream asks for: the list changes the
// server advertises, and the subscribed resources when it offers
// subscriptions.
func (s *session) listenFilter() mcp.SubscriptionFilter {
	f := mcp.SubscriptionFilter{
		ToolsListChanged:     s.caps.ToolsListChanged,
		PromptsListChanged:   s.caps.PromptsListChanged,
		ResourcesListChanged: s.caps.ResourcesListChanged,
	}
	if s.caps.ResourcesSubscribe {
		f.ResourceSubscriptions = s.c.subs.list()
	}
	return f
}

// listen keeps a subscriptions/listen request open while the session
// lives: reopened at once when the subscribed resources change, after
// sseReconnectDelay when the server ends it, after a growing wait (up to
// maxListenBackoff) when it fails. A server that answers it -32601 has no
// notifications to send and is not asked again. Nothing is opened while
// the filter is empty.
func (s *session) listen() {
	wake := s.c.subs.wake()
	backoff := sseReconnectDelay
	for s.ctx.Err() == nil {
		f := s.listenFilter()
		if f.IsEmpty() {
			if live, _ := s.await(wake, nil); !live {
				return
			}
			continue
		}
		params, _ := json.Marshal(mcp.SubscriptionsListenParams{Notifications: f})
		ctx, cancel := context.WithCancel(s.ctx)
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			_, err = s.send(ctx, string(mcp.MethodSubscriptionsListen), "px-"+strconv.FormatUint(s.c.ids.Add(1), 10), params)
		}()
		reopen := false
		select {
		case <-done:
		case <-wake:
			reopen = true
		case <-s.retiring:
		}
		cancel()
		<-done
		if reopen {
			continue
		}
		var rpc *RPCError
		switch {
		case s.ctx.Err() != nil || isClosed(s.retiring):
			return
		case errors.As(err, &rpc) && rpc.Code == mcp.METHOD_NOT_FOUND:
			s.log.Debug().Msg("the server offers no subscriptions/listen")
			return
		case err == nil:
			backoff = sseReconnectDelay
			s.log.Debug().Msg("subscriptions/listen ended; reopening it")
		default:
			s.log.Debug().Err(safe(err)).Dur("retry_in", backoff).Msg("subscriptions/listen failed")
		}
		live, timedOut := s.await(wake, time.After(backoff))
		if !live {
			return
		}
		if timedOut && err != nil {
			backoff = min(2*backoff, maxListenBackoff)
		}
	}
}

// await waits for wake, for after (nil: never) or for the session to end
// (its context or retirement). live is false when it ended; timedOut is
// true when after came first.
func (s *session) await(wake <-chan struct{}, after <-chan time.Time) (live, timedOut bool) {
	select {
	case <-s.ctx.Done():
		return false, false
	case <-s.retiring:
		return false, false
	case <-wake:
		return true, false
	case <-after:
		return true, true
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
