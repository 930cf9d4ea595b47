package downstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/ratelimit"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// Rate limits (docs/agents.md#overrides-and-rate-limits) in the call chain:
//
//   - rateGate, before approval (nobody is asked about a call the limit
//     then refuses), takes a token from every bucket the call falls under:
//     the agent's entries whose patterns match the tool, then the server's
//     per_minute. The first that is empty refuses the call with an isError
//     naming rule rate_limited and the seconds until a retry may pass; the
//     tokens already taken go back. A stateless client's approval round
//     trip also gives its tokens back when the question goes out: the
//     retry that carries the answer takes them again.
//   - send holds one of the server's max_concurrent slots while the call
//     runs upstream (holdSlot), waiting for one in arrival order for at
//     most the call's timeout; once it has one, the timeout of the call
//     itself starts.
//
// With the memory store, buckets and slots are per replica. A reload keeps
// every bucket and slot set whose limit it does not change; a changed
// limit starts afresh. With a Redis store (docs/shared-state.md) they are
// shared by every replica: a call's buckets are taken in one atomic script,
// all or none (so a refusal leaves the others as they were), and its slot
// is a lease that a replica dying mid-call gives back when the call's
// timeout has passed. The same script tries for the slot once the buckets
// gave their tokens, so a call pays one round trip before it runs and one
// (the release) after; on an HTTP session that round trip is also the
// session's read (prepaid.go). A call whose slot was not free then waits
// in send as above, and one that asks a person gives its lease back
// first. Their keys name the limit's figures, so that a reload keeps what
// it does not change there too.

// callLimits are the rate limits of one config; nil when it has none, so
// a call pays nothing for them.
type callLimits struct {
	servers map[string]*serverLimit
	agents  map[string][]*agentLimit
	// shared keeps the buckets and slots in the store; nil: in the process.
	shared *store.Limits
}

// serverLimit is servers.<s>.limits.
type serverLimit struct {
	perMinute, maxConcurrent int
	rate                     *ratelimit.Bucket // nil: no per_minute (or shared)
	slots                    *ratelimit.Slots  // nil: no max_concurrent (or shared)
	rateKey, slotsKey        string            // the shared bucket and slots
}

// agentLimit is one entry of agents.<a>.limits.
type agentLimit struct {
	tools            []string
	perMinute, burst int
	bucket           *ratelimit.Bucket // nil when shared
	key              string            // the shared bucket
}

// buildLimits builds cfg's limits, taking over old's buckets and slots
// (nil: none) wherever the limit is the same; with shared (a Redis
// store) the buckets and slots are named in it instead.
func buildLimits(cfg *config.Config, old *callLimits, now time.Time, shared *store.Limits) *callLimits {
	if shared != nil {
		return sharedLimits(cfg, shared)
	}
	l := &callLimits{servers: map[string]*serverLimit{}, agents: map[string][]*agentLimit{}}
	if old == nil {
		old = &callLimits{}
	}
	for name, s := range cfg.Servers {
		if s == nil || s.Limits.PerMinute <= 0 && s.Limits.MaxConcurrent <= 0 {
			continue
		}
		sl := &serverLimit{perMinute: s.Limits.PerMinute, maxConcurrent: s.Limits.MaxConcurrent}
		prev := old.servers[name]
		if sl.perMinute > 0 {
			if prev != nil && prev.perMinute == sl.perMinute {
				sl.rate = prev.rate
			} else {
				sl.rate = ratelimit.NewBucket(sl.perMinute, sl.perMinute, now)
			}
		}
		if sl.maxConcurrent > 0 {
			if prev != nil && prev.maxConcurrent == sl.maxConcurrent {
				sl.slots = prev.slots
			} else {
				sl.slots = ratelimit.NewSlots(sl.maxConcurrent)
			}
		}
		l.servers[name] = sl
	}
	for name, a := range cfg.Agents {
		if a == nil {
			continue
		}
		reused := map[*agentLimit]bool{}
		for _, c := range a.Limits {
			if c.PerMinute <= 0 || len(c.Tools) == 0 {
				continue // refused by validation
			}
			al := &agentLimit{tools: c.Tools, perMinute: c.PerMinute, burst: max(c.Burst, 1)}
			for _, prev := range old.agents[name] {
				if !reused[prev] && prev.perMinute == al.perMinute && prev.burst == al.burst && slices.Equal(prev.tools, al.tools) {
					al.bucket, reused[prev] = prev.bucket, true
					break
				}
			}
			if al.bucket == nil {
				al.bucket = ratelimit.NewBucket(al.perMinute, al.burst, now)
			}
			l.agents[name] = append(l.agents[name], al)
		}
	}
	if len(l.servers) == 0 && len(l.agents) == 0 {
		return nil
	}
	return l
}

// sharedLimits names cfg's limits in the store: a server's bucket by its
// name and per_minute, its slots by its name and max_concurrent, an agent
// entry's bucket by the agent, its place in the list, its figures and a
// digest of its patterns.
func sharedLimits(cfg *config.Config, shared *store.Limits) *callLimits {
	l := &callLimits{servers: map[string]*serverLimit{}, agents: map[string][]*agentLimit{}, shared: shared}
	for name, s := range cfg.Servers {
		if s == nil || s.Limits.PerMinute <= 0 && s.Limits.MaxConcurrent <= 0 {
			continue
		}
		sl := &serverLimit{perMinute: s.Limits.PerMinute, maxConcurrent: s.Limits.MaxConcurrent}
		if sl.perMinute > 0 {
			sl.rateKey = shared.BucketKey("server", name, strconv.Itoa(sl.perMinute))
		}
		if sl.maxConcurrent > 0 {
			sl.slotsKey = shared.SlotsKey(name, sl.maxConcurrent)
		}
		l.servers[name] = sl
	}
	for name, a := range cfg.Agents {
		if a == nil {
			continue
		}
		for i, c := range a.Limits {
			if c.PerMinute <= 0 || len(c.Tools) == 0 {
				continue // refused by validation
			}
			al := &agentLimit{tools: c.Tools, perMinute: c.PerMinute, burst: max(c.Burst, 1)}
			sum := sha256.Sum256([]byte(strings.Join(c.Tools, "\x00")))
			al.key = shared.BucketKey("agent", name, strconv.Itoa(i), strconv.Itoa(al.perMinute), strconv.Itoa(al.burst), hex.EncodeToString(sum[:8]))
			l.agents[name] = append(l.agents[name], al)
		}
	}
	if len(l.servers) == 0 && len(l.agents) == 0 {
		return nil
	}
	return l
}

// limitRefusal says which limit refused a call and why.
type limitRefusal struct {
	limit string // a metrics.Limit* value
	text  string // what follows "is denied by rate_limited: "
}

// take takes a token for the call from every bucket it falls under: the
// agent's entries that match t, then t's server. On a refusal it gives
// back what it took. Its error is the store's (shared limits only).
func (l *callLimits) take(ctx context.Context, agent string, t filter.Tool, now time.Time) (*limitRefusal, error) {
	if l.shared != nil {
		refusal, _, err := l.takeShared(ctx, agent, t, nil)
		return refusal, err
	}
	entries := l.agents[agent]
	for i, al := range entries {
		if !t.Matches(al.tools) {
			continue
		}
		if ok, wait := al.bucket.Take(now); !ok {
			l.give(ctx, entries[:i], nil, t, now)
			return agentRefusal(agent, al, wait), nil
		}
	}
	if sl := l.servers[t.Server]; sl != nil && sl.rate != nil {
		if ok, wait := sl.rate.Take(now); !ok {
			l.give(ctx, entries, nil, t, now)
			return serverRefusal(t.Server, sl, wait), nil
		}
	}
	return nil, nil
}

func agentRefusal(agent string, al *agentLimit, wait time.Duration) *limitRefusal {
	return &limitRefusal{limit: metrics.LimitAgent, text: fmt.Sprintf(
		"agent '%s' may make %s a minute (burst %d) to %s; retry in %s",
		agent, calls(al.perMinute), al.burst, patternList(al.tools), retryIn(wait))}
}

func serverRefusal(server string, sl *serverLimit, wait time.Duration) *limitRefusal {
	return &limitRefusal{limit: metrics.LimitServerRate, text: fmt.Sprintf(
		"server '%s' takes %s a minute; retry in %s", server, calls(sl.perMinute), retryIn(wait))}
}

// sharedBuckets lists the store's buckets a call falls under, in take's
// order, with the agent entry of each (nil for the server's).
func (l *callLimits) sharedBuckets(entries []*agentLimit, server *serverLimit, t filter.Tool) ([]store.Bucket, []*agentLimit) {
	var buckets []store.Bucket
	var of []*agentLimit
	for _, al := range entries {
		if t.Matches(al.tools) {
			buckets = append(buckets, store.Bucket{Key: al.key, PerMinute: al.perMinute, Burst: al.burst})
			of = append(of, al)
		}
	}
	if server != nil && server.rateKey != "" {
		buckets = append(buckets, store.Bucket{Key: server.rateKey, PerMinute: server.perMinute, Burst: server.perMinute})
		of = append(of, nil)
	}
	return buckets, of
}

// takeShared is take on the store: one script takes every bucket or none
// and, when slot is not nil and they all gave a token, tries for that
// max_concurrent lease too (leased: it got it).
func (l *callLimits) takeShared(ctx context.Context, agent string, t filter.Tool, slot *store.Slot) (refusal *limitRefusal, leased bool, err error) {
	sl := l.servers[t.Server]
	buckets, of := l.sharedBuckets(l.agents[agent], sl, t)
	if len(buckets) == 0 && slot == nil {
		return nil, false, nil
	}
	refused, wait, leased, err := l.shared.TakeWithSlot(ctx, buckets, slot)
	if err != nil {
		return nil, false, err
	}
	return l.refusalOf(agent, t, of, refused, wait), leased, nil
}

// refusalOf is the refusal of a shared take whose bucket refused (-1:
// none, nil) was of[refused] (nil: the server's) and has a token in wait.
func (l *callLimits) refusalOf(agent string, t filter.Tool, of []*agentLimit, refused int, wait time.Duration) *limitRefusal {
	switch {
	case refused < 0 || refused >= len(of):
		return nil
	case of[refused] != nil:
		return agentRefusal(agent, of[refused], wait)
	default:
		return serverRefusal(t.Server, l.servers[t.Server], wait)
	}
}

// give puts back a token in each of entries that match t and in server's
// bucket (nil: none): what take took. The limits of a generation never
// change, so the same buckets match again. A store that fails to take it
// back leaves the tokens taken: the limit errs on the strict side.
func (l *callLimits) give(ctx context.Context, entries []*agentLimit, server *serverLimit, t filter.Tool, now time.Time) {
	if l.shared != nil {
		if buckets, _ := l.sharedBuckets(entries, server, t); len(buckets) > 0 {
			_ = l.shared.Give(context.WithoutCancel(ctx), buckets)
		}
		return
	}
	for _, al := range entries {
		if t.Matches(al.tools) {
			al.bucket.Give(now)
		}
	}
	if server != nil && server.rate != nil {
		server.rate.Give(now)
	}
}

// calls is "1 call" or "n calls".
func calls(n int) string {
	if n == 1 {
		return "1 call"
	}
	return fmt.Sprintf("%d calls", n)
}

// retryIn is a wait in whole seconds, rounded up: "3 s".
func retryIn(wait time.Duration) string {
	return fmt.Sprintf("%d s", int64(math.Max(1, math.Ceil(wait.Seconds()))))
}

// maxPatternText bounds the patterns a refusal repeats.
const maxPatternText = 200

// patternList is an agent limit's tool patterns for a refusal text.
func patternList(tools []string) string {
	s := strings.Join(tools, ", ")
	if len(s) > maxPatternText {
		s = s[:maxPatternText] + "…"
	}
	return sanitize.Text(s)
}

// rateGate applies the rate limits of docs/agents.md#overrides-and-rate-limits (the comment at the top of
// this file): nothing when the config has none.
func (tc *toolCalls) rateGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		l := tc.gen().limits
		if l == nil {
			return next(ctx, c)
		}
		agent, t := c.r.sess.agent.Name, c.entry.policyTool()
		var refusal *limitRefusal
		var err error
		switch pre := claimPrepaid(l, c); {
		case pre != nil:
			refusal = tc.usePrepaid(ctx, c, l, pre)
		case l.shared != nil:
			refusal, err = tc.takeShared(ctx, c, l, agent, t)
		default:
			refusal, err = l.take(ctx, agent, t, tc.now())
		}
		if err != nil {
			c.outcome = metrics.OutcomeError
			return nil, storeError(err)
		}
		if refusal != nil {
			return tc.rateLimited(c, refusal), nil
		}
		res, werr := next(ctx, c)
		if c.slot != nil {
			// Taken with the tokens, never used (denied, or asked).
			c.slot()
			c.slot = nil
		}
		if c.input != nil {
			// Asked the client for input: the retry takes them again.
			l.give(ctx, l.agents[agent], l.servers[t.Server], t, tc.now())
		}
		return res, werr
	}
}

// takeShared takes the call's tokens in the store and, for a server with
// max_concurrent, tries for its slot in the same round trip: a lease got
// there is c.slot, which send uses instead of asking the store again.
func (tc *toolCalls) takeShared(ctx context.Context, c *toolCall, l *callLimits, agent string, t filter.Tool) (*limitRefusal, error) {
	var slot *store.Slot
	sl := l.servers[t.Server]
	if cfg := tc.gen().cfg.Servers[t.Server]; sl != nil && sl.slotsKey != "" && cfg != nil {
		slot = &store.Slot{Key: sl.slotsKey, Max: sl.maxConcurrent, Lease: cfg.Timeout.D(), ID: randid.Hex(16)}
	}
	refusal, leased, err := l.takeShared(ctx, agent, t, slot)
	if leased {
		c.slot = sharedSlotRelease(l.shared, slot)
	}
	return refusal, err
}

// rateLimited counts a refusal and returns the isError result that says it.
func (tc *toolCalls) rateLimited(c *toolCall, r *limitRefusal) json.RawMessage {
	agent := c.r.sess.agent.Name
	c.outcome, c.rule = metrics.OutcomeDenied, filter.RuleRateLimited
	tc.opts.Metrics.RateLimited(agent, c.entry.Server, r.limit)
	tc.opts.Metrics.PolicyDenial(agent, string(filter.RuleRateLimited))
	return textResult("tool '"+c.name+"' is denied by "+string(filter.RuleRateLimited)+": "+r.text, true)
}

// holdSlot takes one of the server's max_concurrent slots for the call,
// waiting in arrival order at most timeout, and returns what gives it
// back when the call ends (nil for a server without max_concurrent, which
// costs one map lookup). Without a slot it returns the refusal (no slot
// came free in time) or the error (the client cancelled the call while it
// waited, or the store did not answer).
func (tc *toolCalls) holdSlot(ctx context.Context, c *toolCall, timeout time.Duration) (func(), json.RawMessage, *wireError) {
	l := tc.gen().limits
	if l == nil {
		return nil, nil, nil
	}
	sl := l.servers[c.entry.Server]
	if l.shared != nil && sl != nil && sl.slotsKey != "" {
		return tc.holdSharedSlot(ctx, c, l.shared, sl, timeout)
	}
	if sl == nil || sl.slots == nil {
		return nil, nil, nil
	}
	if sl.slots.TryAcquire() {
		return sl.slots.Release, nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := sl.slots.Acquire(wctx); err != nil {
		if ctx.Err() != nil {
			c.outcome = metrics.OutcomeCanceled
			return nil, nil, errorf(codeServerError, "request cancelled")
		}
		return nil, tc.rateLimited(c, concurrentRefusal(c, sl, timeout)), nil
	}
	return sl.slots.Release, nil, nil
}

func concurrentRefusal(c *toolCall, sl *serverLimit, timeout time.Duration) *limitRefusal {
	return &limitRefusal{limit: metrics.LimitServerConcurrent, text: fmt.Sprintf(
		"server '%s' takes %s at a time, and none of those in flight ended within %s; retry once they have",
		c.entry.Server, calls(sl.maxConcurrent), timeout)}
}

// holdSharedSlot is holdSlot on the store: a lease for the call's timeout,
// so that the slot of a replica that dies mid-call comes back by then.
func (tc *toolCalls) holdSharedSlot(ctx context.Context, c *toolCall, shared *store.Limits, sl *serverLimit, timeout time.Duration) (func(), json.RawMessage, *wireError) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := randid.Hex(16)
	if err := shared.Acquire(wctx, sl.slotsKey, sl.maxConcurrent, timeout, id); err != nil {
		switch {
		case ctx.Err() != nil:
			c.outcome = metrics.OutcomeCanceled
			return nil, nil, errorf(codeServerError, "request cancelled")
		case errors.Is(err, store.ErrNoSlot):
			return nil, tc.rateLimited(c, concurrentRefusal(c, sl, timeout)), nil
		default:
			c.outcome = metrics.OutcomeError
			return nil, nil, storeError(err)
		}
	}
	return sharedSlotRelease(shared, &store.Slot{Key: sl.slotsKey, ID: id, Lease: timeout}), nil, nil
}

// sharedSlotRelease is what gives back the lease slot took: off the call's
// path, so that the answer does not wait for the round trip; the store
// sends it again while Redis does not take it, until the lease ends.
func sharedSlotRelease(shared *store.Limits, slot *store.Slot) func() {
	return func() { shared.Release(slot.Key, slot.ID, slot.Lease) }
}

// storeError is the JSON-RPC error of a request the shared-state store
// could not serve; its text names the store (docs/shared-state.md).
func storeError(err error) *wireError {
	return errorf(codeServerError, "%s", sanitize.Error(err.Error()))
}
