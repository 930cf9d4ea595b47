package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Approvals keeps the request states of stateless approval round trips
// (docs/agents.md#approval) in Redis, so that the retry carrying the answer
// may reach any replica, and spends each once across all of them: Take is
// one GETDEL. A state is stored under its HMAC, so reading Redis gives no
// state a client could present. It is safe for concurrent use.
type Approvals struct {
	r    *Redis
	keys *Keys
}

// Approvals is the approval-state store of a Redis store, nil with the
// memory store (whose states stay in the process) and on a nil *Store.
func (s *Store) Approvals() *Approvals {
	if s == nil || s.redis == nil {
		return nil
	}
	return &Approvals{r: s.redis, keys: s.keys}
}

// approvalGrace keeps a state this long past its expiry, so that an
// answer that comes late is told so rather than "unknown".
const approvalGrace = time.Minute

func (a *Approvals) key(state string) string {
	return a.r.Key("approval", a.keys.Digest("approval", state))
}

// Issue records state with the value binding (what the answer must match,
// and when it expires) for ttl.
func (a *Approvals) Issue(ctx context.Context, state string, binding []byte, ttl time.Duration) error {
	return a.r.Run(ctx, "approval_issue", func(ctx context.Context, c redisClient) error {
		return c.Set(ctx, a.key(state), binding, ttl+approvalGrace).Err()
	})
}

// Take spends state: it returns its binding and removes it, atomically, so
// that of two replicas taking one state at once only one gets it. ok is
// false for a state unknown, spent or long expired.
func (a *Approvals) Take(ctx context.Context, state string) (binding []byte, ok bool, err error) {
	err = a.r.Run(ctx, "approval_take", func(ctx context.Context, c redisClient) error {
		var err error
		binding, err = c.GetDel(ctx, a.key(state)).Bytes()
		return err
	})
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return binding, true, nil
}
