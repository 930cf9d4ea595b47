package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// maxPingTimeout bounds one keepalive ping; a shorter keepalive interval
// bounds it further, so a ping never overlaps the next.
const maxPingTimeout = 30 * time.Second

// background is a live session's own work, on one goroutine: the
// re-discoveries list_changed notifications ask for (rediscover) and, when
// interval is positive, a keepalive ping every interval (ping). It ends when
// the session dies or is retired, or when either ends the session. The two
// take turns: a re-discovery waits for a ping in flight (at most
// maxPingTimeout, after which a hung upstream is dropped anyway), and a
// ping due during a re-discovery is sent when it ends.
func (s *session) background(interval time.Duration) {
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		var more bool
		select {
		case <-s.ctx.Done():
			return
		case <-s.retiring:
			return
		case <-s.refresh.wake:
			more = s.rediscover()
		case <-tick:
			more = s.ping(interval)
		}
		if !more {
			return
		}
	}
}

// ping sends one keepalive ping. One that fails or does not answer within
// its timeout kills the session with "keepalive ping failed", which starts
// reconnection; one refused for an expired HTTP session renews the session
// instead. It reports whether the session lives on as it was.
func (s *session) ping(interval time.Duration) bool {
	ctx, cancel := context.WithTimeout(s.ctx, min(interval, maxPingTimeout))
	_, err := s.exchange(ctx, "ping", nil)
	cancel()
	switch {
	case err == nil:
		return true
	case s.ctx.Err() != nil:
	case errors.Is(err, ErrSessionExpired): // send's word for errSessionGone
		s.expire()
	default:
		s.die(fmt.Errorf("keepalive ping failed: %w", err))
	}
	return false
}
