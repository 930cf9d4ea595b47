package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run owns the connection for the lifetime ctx. It connects, supervises the
// live session (renewing an expired HTTP session in place), and after a
// failed attempt or a dropped connection waits on the reconnect schedule and
// tries again, until ctx ends. Every session it made is closed, or being
// closed on a goroutine in c.wg, when it returns.
func (c *Conn) run(ctx context.Context) {
	defer c.markReady()
	attempt := 0 // 0: the first connection, or the connection that dropped
	for {
		if attempt > 0 {
			c.publishConnecting(attempt)
		}
		s, err := c.connect(ctx)
		if err != nil && ctx.Err() != nil {
			c.publishClosed()
			return
		}
		if err == nil {
			if !c.publishConnected(s) {
				c.publishClosed()
				s.close()
				return
			}
			s.initial = nil
			s.applyLogLevelLater() // a level set while it connected
			c.log.Info().Str("protocol", s.protocol).Int("tools", len(c.Snapshot().Tools)).
				Int("attempt", attempt).Msg("upstream connected")
			c.markReady()
			s, err = c.supervise(ctx, s)
			if ctx.Err() != nil {
				c.publishClosed()
				s.close()
				return
			}
			attempt = 0
		}
		if isNeedsAuth(err) && c.auth != nil {
			if !c.awaitAuthorization(ctx, s, err) {
				c.publishClosed()
				return
			}
			attempt = 0
			continue
		}

		wait, parked := c.sched.after(attempt)
		next := time.Now().Add(wait)
		c.publishDown(s, err, attempt, next, parked)
		c.markReady()
		c.logDown(err, s != nil, attempt, wait, next, parked)
		if s != nil {
			c.retire(ctx, s, false)
		}
		if sleep(ctx, wait) != nil {
			c.publishClosed()
			return
		}
		attempt++
	}
}

// logDown logs, once, that the server went down: the live connection
// dropped (lost) or connect attempt n failed, and when the next attempt
// starts. Durations are logged as text with their unit ("1.005s").
func (c *Conn) logDown(err error, lost bool, attempt int, wait time.Duration, next time.Time, parked bool) {
	state := StateFailed
	if parked {
		state = StateParked
	}
	ev := c.log.Warn().Str("state", state.String()).Str("error", safe(err).Error()).Int("attempt", attempt).
		Str("retry_in", wait.Round(time.Millisecond).String()).Time("next_retry", next)
	if lost {
		ev = ev.Bool("connection_lost", true)
	}
	ev.Msg("upstream down")
	if parked && attempt == reconnectAttempts {
		c.log.Error().Int("attempts", reconnectAttempts).Str("probe_every", c.sched.probe.String()).
			Msg("reconnect attempts exhausted; server parked")
	}
}

// supervise waits until the live session s dies or ctx ends, and renews it
// when its HTTP session expires. It returns the session live at that
// moment (s or a successor) and, if it died, why.
func (c *Conn) supervise(ctx context.Context, s *session) (*session, error) {
	s.startBackground()
	for {
		select {
		case <-ctx.Done():
			return s, nil
		case <-s.dead:
			return s, s.deathErr()
		case <-s.expired:
			next, err := c.renew(ctx, s)
			if err != nil {
				return s, err
			}
			s = next
		}
	}
}

// renew re-initializes the expired HTTP session s: a new transport and
// client, initialize and a full discovery, bounded by connect_timeout. On
// success the new session takes s's place (its catalog is published if it
// changed), requests waiting on s's renewal are re-sent on it, and s is
// closed once its requests in flight have ended. On failure s dies, which
// drops the connection.
func (c *Conn) renew(ctx context.Context, s *session) (*session, error) {
	c.log.Info().Msg("HTTP session expired; re-initializing")
	next, err := c.connect(ctx)
	if err == nil && !c.replaceSession(s, next) {
		err = errSessionClosed // the Conn is closing
		next.close()
	}
	if err != nil {
		err = fmt.Errorf("%w; re-initialize failed: %w", ErrSessionExpired, err)
		s.die(err)
		s.finishRenewal(nil, err)
		return nil, s.deathErr()
	}
	next.initial = nil
	next.applyLogLevelLater()
	s.finishRenewal(next, nil)
	c.retire(ctx, s, true)
	next.startBackground()
	c.log.Info().Int("tools", len(c.Snapshot().Tools)).Msg("HTTP session re-initialized")
	return next, nil
}

// retire closes s, which is no longer the live session, on a goroutine that
// Close waits for, so a slow teardown never delays the next attempt. With
// drain, s first stops its background work and is closed once its requests
// in flight have ended (or ctx ends), since its transport may still carry
// their answers.
func (c *Conn) retire(ctx context.Context, s *session, drain bool) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if drain {
			select {
			case <-s.retire():
			case <-s.dead:
			case <-ctx.Done():
			}
		}
		s.close()
	}()
}

// sleep waits d, or until ctx ends, then returning its error.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expiredErr is the error of a request that met an expired HTTP session and
// could not be re-sent: it was not executed, and the server is not
// connected.
func expiredErr(cause error) error {
	if errors.Is(cause, ErrSessionExpired) {
		return fmt.Errorf("%w: %w", ErrNotConnected, cause)
	}
	return fmt.Errorf("%w: %w: %w", ErrNotConnected, ErrSessionExpired, cause)
}
