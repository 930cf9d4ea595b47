package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/ratelimit"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
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
// Buckets and slots are per replica. A reload keeps every bucket and slot
// set whose limit it does not change; a changed limit starts afresh.

// callLimits are the rate limits of one config; nil when it has none, so
// a call pays nothing for them.
type callLimits struct {
	servers map[string]*serverLimit
	agents  map[string][]*agentLimit
}

// serverLimit is servers.<s>.limits.
type serverLimit struct {
	perMinute, maxConcurrent int
	rate                     *ratelimit.Bucket // nil: no per_minute
	slots                    *ratelimit.Slots  // nil: no max_concurrent
}

// agentLimit is one entry of agents.<a>.limits.
type agentLimit struct {
	tools            []string
	perMinute, burst int
	bucket           *ratelimit.Bucket
}

// buildLimits builds cfg's limits, taking over old's buckets and slots
// (nil: none) wherever the limit is the same.
func buildLimits(cfg *config.Config, old *callLimits, now time.Time) *callLimits {
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

// limitRefusal says which limit refused a call and why.
type limitRefusal struct {
	limit string // a metrics.Limit* value
	text  string // what follows "is denied by rate_limited: "
}

// take takes a token for the call from every bucket it falls under: the
// agent's entries that match t, then t's server. On a refusal it gives
// back what it took.
func (l *callLimits) take(agent string, t filter.Tool, now time.Time) *limitRefusal {
	entries := l.agents[agent]
	for i, al := range entries {
		if !t.Matches(al.tools) {
			continue
		}
		if ok, wait := al.bucket.Take(now); !ok {
			l.give(entries[:i], nil, t, now)
			return &limitRefusal{limit: metrics.LimitAgent, text: fmt.Sprintf(
				"agent '%s' may make %s a minute (burst %d) to %s; retry in %s",
				agent, calls(al.perMinute), al.burst, patternList(al.tools), retryIn(wait))}
		}
	}
	if sl := l.servers[t.Server]; sl != nil && sl.rate != nil {
		if ok, wait := sl.rate.Take(now); !ok {
			l.give(entries, nil, t, now)
			return &limitRefusal{limit: metrics.LimitServerRate, text: fmt.Sprintf(
				"server '%s' takes %s a minute; retry in %s", t.Server, calls(sl.perMinute), retryIn(wait))}
		}
	}
	return nil
}

// give puts back a token in each of entries that match t and in server's
// bucket (nil: none): what take took. The limits of a generation never
// change, so the same buckets match again.
func (l *callLimits) give(entries []*agentLimit, server *serverLimit, t filter.Tool, now time.Time) {
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
		if refusal := l.take(agent, t, tc.now()); refusal != nil {
			return tc.rateLimited(c, refusal), nil
		}
		res, werr := next(ctx, c)
		if c.input != nil {
			// Asked the client for input: the retry takes them again.
			l.give(l.agents[agent], l.servers[t.Server], t, tc.now())
		}
		return res, werr
	}
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
// waiting in arrival order at most timeout, and returns the slots to
// release when the call ends (nil for a server without max_concurrent,
// which costs one map lookup). Without a slot it returns the refusal (no
// slot came free in time) or the error (the client cancelled the call
// while it waited).
func (tc *toolCalls) holdSlot(ctx context.Context, c *toolCall, timeout time.Duration) (*ratelimit.Slots, json.RawMessage, *wireError) {
	l := tc.gen().limits
	if l == nil {
		return nil, nil, nil
	}
	sl := l.servers[c.entry.Server]
	if sl == nil || sl.slots == nil || sl.slots.TryAcquire() {
		return slotsOf(sl), nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := sl.slots.Acquire(wctx); err != nil {
		if ctx.Err() != nil {
			c.outcome = metrics.OutcomeCanceled
			return nil, nil, errorf(codeServerError, "request cancelled")
		}
		return nil, tc.rateLimited(c, &limitRefusal{limit: metrics.LimitServerConcurrent, text: fmt.Sprintf(
			"server '%s' takes %s at a time, and none of those in flight ended within %s; retry once they have",
			c.entry.Server, calls(sl.maxConcurrent), timeout)}), nil
	}
	return sl.slots, nil, nil
}

// slotsOf is sl's slots, nil when it has none.
func slotsOf(sl *serverLimit) *ratelimit.Slots {
	if sl == nil {
		return nil
	}
	return sl.slots
}
