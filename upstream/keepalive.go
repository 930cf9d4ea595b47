package upstream

import (
	"context"
	"fmt"
	"time"
)

// maxPingTimeout bounds one keepalive ping; a shorter keepalive interval
// bounds it further, so a ping never overlaps the next.
const maxPingTimeout = 30 * time.Second

// keepalive pings the upstream every interval. A ping that fails or does not
// answer within its timeout kills the session with "keepalive ping failed",
// which starts reconnection; a ping refused for an expired HTTP session
// renews the session instead. It ends when the session dies or is retired.
func (s *session) keepalive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	timeout := min(interval, maxPingTimeout)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.retiring:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, timeout)
		err := s.cl.Ping(withMethod(ctx, "ping"))
		cancel()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if s.sessionExpired(err) {
				s.expire()
				return
			}
			s.die(fmt.Errorf("keepalive ping failed: %w", err))
			return
		}
	}
}
