package downstream

import (
	"context"
	"sync/atomic"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// With a Redis store, a tools/call on an HTTP session this replica already
// holds pays one round trip before it runs: the read of its session
// (sessionTable.acquireShared) and the take of its rate-limit tokens and
// max_concurrent lease go in one pipeline. The local copy of the session
// tells the agent, and so the limits the call falls under; the call's
// steps before rateGate are checked ahead (the tool is known, the policy
// allows it, it is not held, its server is up) so that a call they would
// refuse takes nothing. What was taken is a prepaid: the HTTP front hands
// it to the route with the message (inbound), the request carries it
// (request.prepaid), and rateGate uses it when the call is the one it was
// taken for. When the guess was wrong (the stored session is gone, or
// serves someone else) it is given back at once and the request goes on
// as any other; when the call never used it (a reload in between, a
// refusal before rateGate) it is given back when the request ends.
// docs/shared-state.md#cost counts the round trips.

// prepaid is what one tools/call took with its session's read.
type prepaid struct {
	limits  *callLimits // the generation's limits it was taken under
	sess    *session
	entry   *ToolEntry
	tool    filter.Tool
	buckets []store.Bucket
	slot    *store.Slot // nil: the server has no max_concurrent
	took    store.TakeResult
	done    atomic.Bool // used by rateGate, or given back
}

// claimPrepaid returns the prepaid its request brought to call c when it
// was taken for c under limits l, and marks it used; nil otherwise.
func claimPrepaid(l *callLimits, c *toolCall) *prepaid {
	pre := c.r.prepaid
	if pre == nil || pre.limits != l || pre.sess != c.r.sess || pre.entry != c.entry || c.round != nil {
		return nil
	}
	if !pre.done.CompareAndSwap(false, true) {
		return nil
	}
	return pre
}

// giveBack returns what pre took unless rateGate used it; a second call
// does nothing. A store that fails to take the tokens back leaves them
// taken (the limit errs on the strict side); the lease is given back in
// the background (store.Limits.Release), tried again until it ends.
func (pre *prepaid) giveBack(ctx context.Context) {
	if pre == nil || !pre.done.CompareAndSwap(false, true) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	shared := pre.limits.shared
	if pre.took.Refused < 0 && len(pre.buckets) > 0 {
		_ = shared.Give(ctx, pre.buckets)
	}
	if pre.took.Leased {
		shared.Release(pre.slot.Key, pre.slot.ID, pre.slot.Lease)
	}
}

// prepay is what a tools/call of tool name on s would take in the store,
// nil when it would take nothing there or might not reach rateGate.
func (tc *toolCalls) prepay(s *session, name string) *prepaid {
	g := tc.gen()
	l := g.limits
	if l == nil || l.shared == nil {
		return nil
	}
	entry, ok := tc.catalogs.Catalog().Lookup(name)
	if !ok || entry.Held {
		return nil
	}
	t := entry.policyTool()
	if s.agent.Decide(t, s.perCall) != filter.RuleNone || tc.serverUp(entry.Server) != nil {
		return nil
	}
	sl := l.servers[t.Server]
	buckets, _ := l.sharedBuckets(l.agents[s.agent.Name], sl, t)
	var slot *store.Slot
	if cfg := g.cfg.Servers[t.Server]; sl != nil && sl.slotsKey != "" && cfg != nil {
		slot = &store.Slot{Key: sl.slotsKey, Max: sl.maxConcurrent, Lease: cfg.Timeout.D(), ID: randid.Hex(16)}
	}
	if len(buckets) == 0 && slot == nil {
		return nil
	}
	return &prepaid{limits: l, sess: s, entry: entry, tool: t, buckets: buckets, slot: slot}
}

// usePrepaid is rateGate's take for a call whose tokens (and lease) came
// with its session's read.
func (tc *toolCalls) usePrepaid(ctx context.Context, c *toolCall, l *callLimits, pre *prepaid) *limitRefusal {
	if pre.took.Leased {
		c.slot = sharedSlotRelease(l.shared, pre.slot)
	}
	if pre.took.Refused < 0 {
		return nil
	}
	agent := c.r.sess.agent.Name
	_, of := l.sharedBuckets(l.agents[agent], l.servers[pre.tool.Server], pre.tool)
	return l.refusalOf(agent, pre.tool, of, pre.took.Refused, pre.took.Wait)
}
