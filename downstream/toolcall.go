package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// What happens to a tools/call, in order:
//
//  1. callTool reads the params (name, arguments, _meta, task) from the
//     request's bytes; nothing is decoded beyond the name. A call with a
//     task member is a task-augmented call (tasks.go): the same chain, and
//     its CreateTaskResult gets the proxy's task id.
//  2. A later round of a stateless client's parked call resumes it
//     (roundtrip.go). The proxy's own tools (tool_search, call_tool,
//     mcp_resources, mcp_prompts) run here (owntools_search.go, owntools_resources.go).
//  3. The name is resolved in the catalog (waiting for upstreams still
//     starting); an unknown one is the JSON-RPC error "unknown tool".
//  4. The call chain, built once in New, runs its steps:
//     observeCall (metrics and the log line, once per call) →
//     policyGate (docs/agents.md#the-policy-rules, rules 1–6) → quarantineGate (docs/security.md#tool-integrity) →
//     pinnedGate (docs/agents.md#overrides-and-rate-limits: a client value for a pinned argument is
//     refused, the pinned values are set, overrides.go) →
//     upGate (the server takes requests: nothing below is spent on a call
//     that cannot run) →
//     rateGate (docs/agents.md#overrides-and-rate-limits per_minute buckets of the agent and the server,
//     limits.go; before approval, so nobody is asked about a call the
//     limit then refuses) →
//     approvalGate (docs/agents.md#approval) →
//     send (the upstream request: argument cleanup, progress,
//     cancellation, a max_concurrent slot held while it runs upstream,
//     timeout; parked for stateless HTTP clients) →
//     the result rewrite (blobs to files, TAG characters).

// toolCalls answers tools/list and tools/call: a call runs the own tools,
// or the chain of steps above to its upstream.
type toolCalls struct {
	*env
	catalogs  toolCatalog
	views     toolViews
	own       ownRunner
	relay     callRelay
	approvals approvalStates // approval states of stateless clients (approval.go)
	tasks     *taskTable     // the tasks clients created (tasks.go)
	// decorate finishes a 2026-07-28 result the route would (a view's
	// list is decorated once per view).
	decorate func(method string, res json.RawMessage, hint cacheHint) json.RawMessage
	chain    callHandler // the steps of a call, built once
}

// toolCatalog is what the tool calls need of the catalog.
type toolCatalog interface {
	catalogWait
	awaitTool(ctx context.Context, name string)
}

// toolViews gives the tools/list result of a session's view.
type toolViews interface {
	viewFor(s *session) *view
	listFor(s *session) []byte
}

// callRelay is what a request sent upstream for a client needs of the
// relay: to be known in flight to its server (a server's request during it
// finds its client), its progress carried, and, for a stateless HTTP
// client, its rounds parked (roundtrip.go).
type callRelay interface {
	begin(ctx context.Context, server string, r *request) (end func())
	openProgress(r *request, server string, meta json.RawMessage) (json.RawMessage, *progressRoute)
	startParked(ctx context.Context, r *request, key string, timeout time.Duration, progress *progressRoute,
		job func(context.Context) (json.RawMessage, *wireError)) (json.RawMessage, *inputRequired, *wireError)
	resumeParked(ctx context.Context, r *request, st roundState) (json.RawMessage, *inputRequired, *wireError)
	// sortInputs sorts out a 2026-07-28 upstream's input requests for a
	// client with caps (passthrough.go).
	sortInputs(srv string, caps clientCaps, raw json.RawMessage) (sortedInputs, error)
}

// ownRunner runs the own tools.
type ownRunner interface {
	ownCall(ctx context.Context, r *request, name string, args, meta json.RawMessage) (json.RawMessage, *wireError, bool)
}

func newToolCalls(e *env, catalogs toolCatalog, views toolViews, own ownRunner, relay callRelay,
	decorate func(string, json.RawMessage, cacheHint) json.RawMessage) *toolCalls {
	t := &toolCalls{env: e, catalogs: catalogs, views: views, own: own, relay: relay, decorate: decorate}
	t.chain = buildCallChain(t.send, t.observeCall, t.policyGate, t.quarantineGate, t.pinnedGate, t.upGate, t.rateGate, t.approvalGate)
	return t
}

// toolCall is one tools/call on its way through the chain.
type toolCall struct {
	r     *request
	name  string          // the name the client called
	args  json.RawMessage // the client's arguments, as sent
	meta  json.RawMessage // the client's params._meta, as sent
	entry *ToolEntry
	// upArgs are the arguments to send upstream when they differ from
	// args (the tool's pinned values set, pinnedGate); nil means args.
	upArgs json.RawMessage

	// Set along the chain, read by observeCall.
	outcome  string        // the metrics outcome
	rule     filter.Rule   // the rule that denied it, if one did
	approval string        // the approval decision, when a person was asked
	elapsed  time.Duration // time spent upstream
	// input is set when the answer asks the client for input (a multi
	// round-trip): the call is not over, a later round goes on with it.
	input *inputRequired
	// round is the request state of a later round of a call whose
	// 2026-07-28 upstream asked for input (passthrough.go), nil on a
	// first round; responses are the client's inputResponses to it.
	round     *roundState
	responses json.RawMessage
	// task is the client's task member (a task-augmented call, tasks.go),
	// nil when none; upTask is set when it was forwarded.
	task   json.RawMessage
	upTask bool
	// slot gives back the max_concurrent lease rateGate took with the
	// call's tokens (a Redis store), for send to use; nil: none.
	slot func()
}

// callHandler is one step of the call chain.
type callHandler func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError)

// callMiddleware wraps a step.
type callMiddleware func(callHandler) callHandler

// buildCallChain wraps last in the steps, outermost first.
func buildCallChain(last callHandler, steps ...callMiddleware) callHandler {
	for i := len(steps) - 1; i >= 0; i-- {
		last = steps[i](last)
	}
	return last
}

// listTools answers tools/list, after the startup wait every session's
// list gets (docs/operations.md#startup).
func (tc *toolCalls) listTools(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	tc.catalogs.waitStartup(ctx)
	tc.refreshStale(r.sess)
	if err := r.sess.readActivations(ctx); err != nil {
		return nil, storeError(err)
	}
	if r.modern && r.sess.state.NothingActivated() {
		if hint := tc.listHint(r.sess, r.method); hint == (cacheHint{}) {
			// The common case, decorated once per view; a list with a
			// TTL is decorated for this request, its TTL counting down.
			r.decorated = true
			return tc.views.viewFor(r.sess).modernList(tc.decorate), nil
		}
	}
	return tc.views.listFor(r.sess), nil
}

// callTool answers tools/call.
func (tc *toolCalls) callTool(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	req, werr := readCallParams(r.params)
	if werr != nil {
		return nil, werr
	}
	if r.modern && r.header != nil {
		if werr := tc.paramHeaders(ctx, r, req.name); werr != nil {
			return nil, werr
		}
	}
	if r.modern && len(req.state) > 0 {
		if state, _ := req.stateString(); isSealedState(state) {
			st, werr := tc.openState(r, req.name, state)
			if werr != nil {
				return nil, werr
			}
			if st.Park != "" {
				res, input, werr := tc.relay.resumeParked(ctx, r, st) // a later round of a parked call (roundtrip.go)
				return input.resultOr(res), werr
			}
			return tc.nextRound(ctx, r, req, st)
		}
	}
	if len(req.task) > 0 {
		return tc.forwardTask(ctx, r, req)
	}
	return tc.forwardCall(ctx, r, req.name, req.args, req.meta)
}

// forwardTask is forwardCall for a call with a task member: the own tools
// take no tasks (the member is left out), and a session that holds its
// maximum of tasks is refused before anything runs when the tool's server
// would make a task (else the call runs as a plain call: taskParam).
func (tc *toolCalls) forwardTask(ctx context.Context, r *request, req callRequest) (json.RawMessage, *wireError) {
	tc.catalogs.awaitTool(ctx, req.name)
	entry, ok := tc.catalogs.Catalog().Lookup(req.name)
	if !ok {
		return tc.forwardCall(ctx, r, req.name, req.args, req.meta)
	}
	up := tc.gen().ups[entry.Server]
	if tasksFor(r) && up != nil && up.Snapshot().Capabilities.Tasks.ToolCalls && !tc.tasks.room(r.sess) {
		return nil, tooManyTasks()
	}
	return tc.chain(ctx, &toolCall{r: r, name: req.name, args: req.args, meta: req.meta, entry: entry, task: req.task})
}

// paramHeaders checks a stateless HTTP call's Mcp-Param-* headers against
// its arguments (paramheaders.go), for the tool the client sees under name.
// A name the client cannot call is not checked: the call chain answers it
// as unknown, with nothing said of the tool's declarations.
func (tc *toolCalls) paramHeaders(ctx context.Context, r *request, name string) *wireError {
	tc.catalogs.awaitTool(ctx, name)
	e, ok := tc.catalogs.Catalog().Lookup(name)
	if !ok || !e.listed() || r.sess.agent.Decide(e.policyTool(), r.sess.perCall).Hidden() {
		return nil
	}
	return checkParamHeaders(r.header, e.Raw, r.params)
}

// nextRound is a later round of a call whose 2026-07-28 upstream asked the
// client for input (passthrough.go): the state must be good for this
// client, tool and arguments; the call goes through the chain again (the
// policy and the rate limits still hold; a round that asked for input gave
// its tokens back), without asking for approval a second time, and the
// upstream gets the client's responses with its own state.
func (tc *toolCalls) nextRound(ctx context.Context, r *request, req callRequest, st roundState) (json.RawMessage, *wireError) {
	if st.Args != argsDigest(req.args) {
		return nil, invalidState("the arguments differ from the first round's")
	}
	tc.catalogs.awaitTool(ctx, req.name)
	entry, ok := tc.catalogs.Catalog().Lookup(req.name)
	if !ok {
		return nil, tc.unknownTool(r.sess, req.name)
	}
	if entry.Server != st.Server {
		return nil, invalidState("the tool belongs to another MCP server since")
	}
	responses, _, err := rawjson.Get(r.params, "inputResponses")
	if err != nil || (len(responses) > 0 && responses[0] != '{' && !rawjson.IsNull(responses)) {
		return nil, errorf(codeInvalidParams, "invalid params: inputResponses must be an object")
	}
	return tc.chain(ctx, &toolCall{r: r, name: req.name, args: req.args, meta: req.meta, entry: entry, round: &st, responses: responses})
}

// forwardCall calls one tool by name for r: the proxy's own tools, or an
// upstream tool through the call chain. call_tool comes here too, so it
// returns whatever the direct call would.
func (tc *toolCalls) forwardCall(ctx context.Context, r *request, name string, args, meta json.RawMessage) (json.RawMessage, *wireError) {
	tc.catalogs.awaitTool(ctx, name) // the own tools too: mcp_resources needs a server that offers resources
	if res, werr, own := tc.own.ownCall(ctx, r, name, args, meta); own {
		return res, werr
	}
	entry, ok := tc.catalogs.Catalog().Lookup(name)
	if !ok {
		return nil, tc.unknownTool(r.sess, name)
	}
	return tc.chain(ctx, &toolCall{r: r, name: name, args: args, meta: meta, entry: entry})
}

// observeCall records every call once: its metric by the upstream's tool
// name and outcome, its log line (debug; warn for a failure), its audit
// line (docs/operations.md#traces) and what its trace span says of it.
func (tc *toolCalls) observeCall(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		start := time.Now()
		res, werr := next(ctx, c)
		if c.input != nil {
			return res, werr // asked the client for input: the call goes on in a later round
		}
		if c.outcome == "" {
			c.outcome = metrics.OutcomeOK
			if werr != nil {
				c.outcome = metrics.OutcomeError
			}
		}
		tc.opts.Metrics.ToolCallOf(c.entry.series, c.entry.Server, c.entry.Name, c.outcome, c.elapsed)
		code := 0
		if werr != nil {
			code = werr.Code
		}
		sp := tc.opts.Tracer.SpanFromContext(ctx)
		sp.SetServer(c.entry.Server)
		sp.SetPolicyRule(string(c.rule))
		sp.SetApproval(c.approval)
		sp.SetOutcome(c.outcome, code)
		tc.auditDecision(ctx, c.r, auditEvent{target: c.name, server: c.entry.Server, rule: string(c.rule),
			approval: c.approval, outcome: c.outcome, args: c.args, start: start}, werr)
		ev := tc.log.Debug()
		if werr != nil {
			ev = tc.log.Warn()
		}
		if ev.Enabled() {
			ev = callEvent(ev, c.r.sess.agent.Name, c.entry).Str("outcome", c.outcome).Dur("duration", c.elapsed)
			switch {
			case c.rule != filter.RuleNone:
				ev.Str("rule", string(c.rule)).Msg("tool call denied")
			case werr != nil:
				ev.Str("error", werr.Message).Msg("tool call failed")
			default:
				ev.Int("bytes", len(res)).Msg("tool call")
			}
		}
		return res, werr
	}
}

// callEvent adds a call's agent, server and tool to a log event.
func callEvent(e *zerolog.Event, agent string, entry *ToolEntry) *zerolog.Event {
	return e.Str("agent", agent).Str("server", entry.Server).Str("tool", entry.Name)
}

// policyGate applies docs/agents.md#the-policy-rules, rules 1–6. Rules 1–2 hide the tool: calling it
// is "unknown tool"; the others answer an isError result naming the rule.
func (tc *toolCalls) policyGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		s := c.r.sess
		rule := s.agent.Decide(c.entry.policyTool(), s.perCall)
		if rule == filter.RuleNone {
			return next(ctx, c)
		}
		c.outcome, c.rule = metrics.OutcomeDenied, rule
		tc.opts.Metrics.PolicyDenial(s.agent.Name, string(rule))
		if rule.Hidden() {
			return nil, unknownTool(c.name)
		}
		return denied(c.name, rule), nil
	}
}

// quarantineGate refuses a tool that tool integrity holds (docs/security.md#tool-integrity), with
// the command that reviews it.
func (tc *toolCalls) quarantineGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		if !c.entry.Held {
			return next(ctx, c)
		}
		c.outcome, c.rule = metrics.OutcomeDenied, filter.RuleQuarantined
		tc.opts.Metrics.PolicyDenial(c.r.sess.agent.Name, string(filter.RuleQuarantined))
		return textResult(c.entry.refusal, true), nil
	}
}

// upGate fails a call to a server that does not take requests now: no
// rate limit token is spent and no person asked about a call that cannot
// run.
func (tc *toolCalls) upGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		if err := tc.serverUp(c.entry.Server); err != nil {
			c.outcome = metrics.OutcomeError
			return nil, err
		}
		return next(ctx, c)
	}
}

// approvalGate asks the person when the agent's autonomy wants it
// (docs/agents.md#approval, approval.go).
func (tc *toolCalls) approvalGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		if c.round != nil {
			return next(ctx, c) // approved in its first round, for these arguments
		}
		approval, err := approvalOf(ctx, c)
		if err != nil {
			c.outcome = metrics.OutcomeError
			return nil, storeError(err)
		}
		if approval == filter.ApprovalRun {
			return next(ctx, c)
		}
		if c.slot != nil {
			// Nobody holds a slot while a person decides.
			c.slot()
			c.slot = nil
		}
		refusal, ask, werr := tc.approve(ctx, c)
		if werr != nil {
			return nil, werr
		}
		if ask != nil {
			c.input = ask
			return ask.result, nil
		}
		if refusal != nil {
			c.outcome = metrics.OutcomeDenied
			return refusal, nil
		}
		return next(ctx, c)
	}
}

// send is the chain's last step: it sends the call upstream and waits for
// its outcome, or parks it for a stateless HTTP client (roundtrip.go).
func (tc *toolCalls) send(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
	// A lease taken with the call's tokens (rateGate) is this call's slot;
	// taken here, before the call may run on another goroutine.
	held := c.slot
	c.slot = nil
	g := tc.gen()
	up, cfg := g.ups[c.entry.Server], g.cfg.Servers[c.entry.Server]
	if up == nil || cfg == nil {
		if held != nil {
			held()
		}
		c.outcome = metrics.OutcomeError
		return nil, notConnected(c.entry.Server)
	}
	meta, progress := tc.relay.openProgress(c.r, c.entry.Server, c.meta)
	args := c.args
	if c.upArgs != nil {
		args = c.upArgs
	}
	params, err := callParams(c.entry.Name, withoutApproved(args), meta)
	switch {
	case err == nil && c.round != nil:
		params, err = roundParams(params, c.responses, c.round.Own, c.round.Up)
	case err == nil:
		params, err = unaskedResponses(params, c.r, up)
	}
	if task := tc.taskParam(c, up); err == nil && task != nil {
		params, err = rawjson.Set(params, "task", task)
		c.upTask = true
	}
	if err != nil {
		if held != nil {
			held()
		}
		progress.close()
		c.outcome = metrics.OutcomeError
		return nil, errorf(codeInvalidParams, "invalid tools/call params: %s", sanitize.Error(err.Error()))
	}
	run := func(ctx context.Context) (json.RawMessage, *wireError) {
		defer progress.close()
		release := held
		if release == nil {
			var refusal json.RawMessage
			var werr *wireError
			release, refusal, werr = tc.holdSlot(ctx, c, cfg.Timeout.D())
			if refusal != nil || werr != nil {
				return refusal, werr
			}
		}
		if release != nil {
			defer release()
		}
		return tc.runCall(ctx, c, up, cfg.Timeout.D(), params)
	}
	if parkable(c.r) {
		res, input, werr := tc.relay.startParked(ctx, c.r, c.entry.Exposed, cfg.Timeout.D(), progress, run)
		if input != nil {
			c.input = input
		}
		return input.resultOr(res), werr
	}
	return run(ctx)
}

// runCall sends the call's params upstream and waits for the outcome.
func (tc *toolCalls) runCall(ctx context.Context, c *toolCall, up Upstream, timeout time.Duration, params json.RawMessage) (json.RawMessage, *wireError) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	end := tc.relay.begin(cctx, c.entry.Server, c.r)
	defer end()
	cctx = upstream.WithClientCapabilities(cctx, c.r.caps.upstreamCaps()) // upcaps.go
	if c.r.modern {
		// A 2026-07-28 upstream's input requests go to the client as they
		// are (passthrough.go).
		cctx = upstream.WithInputRequiredPassthrough(cctx)
	}
	start := time.Now()
	var result json.RawMessage
	var err error
	for own := 0; ; own++ {
		result, err = up.Request(withRequest(cctx, c.r), "tools/call", params)
		if err != nil || !c.r.modern || !isInputRequired(result) {
			break
		}
		p := tc.passInputs(c, params, result, timeout, own)
		if p.next == nil {
			c.elapsed = time.Since(start)
			c.input = p.input
			if p.werr != nil {
				c.outcome = metrics.OutcomeError
			} else if p.input == nil {
				c.outcome = metrics.OutcomeToolError
			}
			return p.input.resultOr(p.final), p.werr
		}
		params = p.next // the proxy answered every request of the round itself
	}
	c.elapsed = time.Since(start)
	var mc *missingCapability
	switch {
	case c.r.missingError() != nil:
		// The server asked the 2026-07-28 client for what it did not
		// declare; whatever the server made of the refusal, the client
		// is told which capability its call needs.
		c.outcome = metrics.OutcomeError
		return nil, c.r.missingError()
	case !c.r.modern && errors.As(err, &mc):
		// A 2026-07-28 server's input request this session-era client
		// cannot answer: the call's result says which capability.
		c.outcome = metrics.OutcomeToolError
		return mc.toolResult(c.entry.Exposed), nil
	}
	var werr *wireError
	c.outcome, werr = tc.classify(c.entry, result, err, ctx, cctx, timeout)
	if werr != nil {
		return nil, werr
	}
	if c.upTask {
		if res, werr, ok := tc.createdTask(ctx, c, up, result); ok {
			if werr != nil {
				c.outcome = metrics.OutcomeError
			}
			return res, werr
		}
	}
	return tc.rewriteResult(c.r.sess.agent.Name, c.entry.Server, result, c.r.linkOK()), nil
}

// passOutcome is what passInputs makes of an upstream's input_required
// result: exactly one of its fields is set.
type passOutcome struct {
	input *inputRequired  // the input_required result the client gets
	next  json.RawMessage // the params of the upstream's next round
	final json.RawMessage // the call's isError result
	werr  *wireError      // the error that ends the call
}

// passInputs handles a 2026-07-28 upstream's input_required result for a
// 2026-07-28 client (passthrough.go): the input_required result the client
// gets, with the state of the next round sealed; or, when the proxy
// answered every input request itself, the params of the upstream's next
// round (own counts such rounds in a row; params are this round's); or
// what ends the call.
func (tc *toolCalls) passInputs(c *toolCall, params, result json.RawMessage, timeout time.Duration, own int) passOutcome {
	srv := c.entry.Server
	round := 1
	if c.round != nil {
		round = c.round.Round + 1
	}
	if round+own > maxInputRounds {
		return passOutcome{werr: errorf(codeInternal, "MCP server '%s' still asked for input after %d rounds", srv, maxInputRounds)}
	}
	sorted, err := tc.relay.sortInputs(srv, c.r.caps, result)
	var mc *missingCapability
	switch {
	case errors.As(err, &mc):
		return passOutcome{werr: mc.wire()}
	case errors.Is(err, errBadInputs):
		return passOutcome{werr: errorf(codeInternal, "MCP server '%s': %s", srv, tc.errText(err.Error()))}
	case err != nil:
		return passOutcome{final: textResult(fmt.Sprintf("tool '%s' was not completed: the proxy refused its MCP server's request: %s",
			c.entry.Exposed, tc.errText(err.Error())), true)}
	}
	ownAnswers, _ := json.Marshal(sorted.own) // raw values: never fails
	if len(sorted.toClient) == 0 && len(sorted.own) > 0 {
		next, err := roundParams(params, nil, ownAnswers, sorted.upState)
		if err != nil {
			return passOutcome{werr: errorf(codeInternal, "MCP server '%s': %s", srv, tc.errText(err.Error()))}
		}
		return passOutcome{next: next}
	}
	st := newRoundState(c.r, c.entry.Exposed)
	st.Args, st.Server, st.Round, st.Up = argsDigest(c.args), srv, round, sorted.upState
	if len(sorted.own) > 0 {
		st.Own = ownAnswers
	}
	return passOutcome{input: newInputRequired(sorted.toClient, tc.sealState(st, timeout))}
}

// classify maps a call's error to its metric outcome and downstream error.
func (tc *toolCalls) classify(entry *ToolEntry, result json.RawMessage, err error, ctx, cctx context.Context, timeout time.Duration) (string, *wireError) {
	var rpcErr *upstream.RPCError
	switch {
	case err == nil:
		if IsErrorResult(result) {
			return metrics.OutcomeToolError, nil
		}
		return metrics.OutcomeOK, nil
	case ctx.Err() != nil:
		return metrics.OutcomeCanceled, errorf(codeServerError, "request cancelled")
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return metrics.OutcomeTimeout, errorf(codeTimeout, "MCP tool call '%s' timed out after %s", entry.Exposed, timeout)
	case errors.As(err, &rpcErr):
		return metrics.OutcomeError, &wireError{Code: rpcErr.Code, Message: tc.errText(rpcErr.Message), Data: tc.errorData(rpcErr.Data)}
	case invalidResult(err):
		return metrics.OutcomeError, errorf(codeInternal, "%s", tc.errText(err.Error()))
	case errors.Is(err, upstream.ErrNeedsAuth):
		return metrics.OutcomeError, needsAuth(entry.Server, tc.errText(err.Error()))
	case errors.Is(err, upstream.ErrNotConnected):
		return metrics.OutcomeError, tc.notSent(entry.Server, err)
	case errors.Is(err, upstream.ErrConnectionLost):
		// The call may or may not have run: it is never replayed (docs/operations.md#reconnection).
		return metrics.OutcomeError, &wireError{Code: codeServerError, Message: tc.errText(fmt.Sprintf(
			"MCP server '%s' was lost during the call; it was not retried and its outcome is unknown (%v)",
			entry.Server, err))}
	case errors.Is(err, upstream.ErrResponseTooLarge):
		var tl *upstream.ResponseTooLargeError
		msg := "MCP response body exceeds the byte limit"
		if errors.As(err, &tl) {
			msg = tl.Error()
		}
		return metrics.OutcomeError, &wireError{Code: codeServerError, Message: msg}
	default:
		return metrics.OutcomeError, &wireError{Code: codeServerError,
			Message: tc.errText(fmt.Sprintf("MCP server '%s': %v", entry.Server, err))}
	}
}

func unknownTool(name string) *wireError {
	return &wireError{Code: codeInvalidParams, Message: "unknown tool: " + sanitize.Error(name)}
}

// unknownTool is the error of a name no server lists. When the name has the
// prefix of a server the session's agent is granted and that server is
// down without ever having listed its tools, the error says it is down and
// why instead: "unknown tool" would hide the cause. A server the agent is
// not granted stays unknown (docs/agents.md#the-policy-rules, rule 1).
func (tc *toolCalls) unknownTool(s *session, name string) *wireError {
	g := tc.gen()
	style := tc.style()
	for _, srv := range g.serverNames() {
		cfg := g.cfg.Servers[srv]
		prefix := style.NamePrefix(cfg.PrefixValue())
		if prefix == "" || !strings.HasPrefix(name, prefix) || !s.agent.Granted(srv) {
			continue
		}
		if werr := tc.serverUp(srv); werr != nil {
			return werr
		}
	}
	return unknownTool(name)
}

// callRequest is the part of tools/call params the proxy reads: raw
// sub-slices of the request, never decoded beyond the name.
type callRequest struct {
	name  string
	args  json.RawMessage
	meta  json.RawMessage
	state json.RawMessage // requestState (a stateless client's later round, roundtrip.go)
	task  json.RawMessage // task (a task-augmented call, tasks.go)
}

// stateString is the request's requestState when it is a string.
func (c callRequest) stateString() (string, bool) {
	var s string
	if len(c.state) == 0 || c.state[0] != '"' || json.Unmarshal(c.state, &s) != nil {
		return "", false
	}
	return s, true
}

// readCallParams reads a tools/call's params.
func readCallParams(params json.RawMessage) (callRequest, *wireError) {
	var c callRequest
	if len(params) == 0 || params[0] != '{' {
		return c, errorf(codeInvalidParams, "invalid params: tools/call needs a params object")
	}
	// The members are read as the walk validates them, in order, and
	// the first bad one is reported only once the whole object is valid:
	// an invalid object's error comes first.
	named, badName := false, false
	if err := rawjson.EachMember(params, func(m rawjson.Member) bool {
		if badName {
			return true
		}
		v := params[m.ValueStart:m.ValueEnd]
		switch m.Key {
		case "name":
			name, err := rawjson.Unquote(v)
			if err != nil {
				badName = true
				return true
			}
			c.name = name
			named = true
		case "arguments":
			c.args = v
		case "_meta":
			if string(v) != "null" {
				c.meta = v
			}
		case "requestState":
			c.state = v
		case "task":
			if string(v) != "null" {
				c.task = v
			}
		}
		return true
	}); err != nil {
		return callRequest{}, errorf(codeInvalidParams, "invalid params: %s", err.Error())
	}
	if badName {
		return c, errorf(codeInvalidParams, "invalid params: the tool name must be a string")
	}
	if !named {
		return c, errorf(codeInvalidParams, "invalid params: tools/call needs a tool name")
	}
	if len(c.args) > 0 && c.args[0] != '{' && string(c.args) != "null" {
		return c, errorf(codeInvalidParams, "invalid params: arguments must be an object")
	}
	if len(c.meta) > 0 && c.meta[0] != '{' {
		return c, errorf(codeInvalidParams, "invalid params: _meta must be an object")
	}
	if len(c.task) > 0 && c.task[0] != '{' {
		return c, errorf(codeInvalidParams, "invalid params: task must be an object")
	}
	return c, nil
}

// callParams builds the upstream tools/call params: the upstream's own tool
// name, the argument bytes (the client's as they came, with any pinned
// values set), and the client's _meta, written once into a buffer of their
// size.
func callParams(name string, args, meta json.RawMessage) (json.RawMessage, error) {
	meta, err := hopMeta(meta)
	if err != nil {
		return nil, err
	}
	withArgs := len(args) > 0 && string(args) != "null"
	withMeta := len(meta) > 0 && string(meta) != "null" && string(meta) != "{}"
	quoted := rawjson.String(name)
	n := len(`{"name":}`) + len(quoted)
	if withArgs {
		n += len(`,"arguments":`) + len(args)
	}
	if withMeta {
		n += len(`,"_meta":`) + len(meta)
	}
	params := make([]byte, 0, n)
	params = append(append(params, `{"name":`...), quoted...)
	if withArgs {
		params = append(append(params, `,"arguments":`...), args...)
	}
	if withMeta {
		params = append(append(params, `,"_meta":`...), meta...)
	}
	return append(params, '}'), nil
}

// unaskedResponses adds a 2026-07-28 client's inputResponses to the
// params of a call's first round (one without a request state) for a
// 2026-07-28 upstream: answers the server did not ask for in this call,
// which it may take or ignore as it sees fit (MCP 2026-07-28, multi
// round-trip requests), as it would if the client spoke to it directly. A
// session-era upstream never gets them: its requests carry no keys they
// could answer.
func unaskedResponses(params json.RawMessage, r *request, up Upstream) (json.RawMessage, error) {
	if !r.modern || up.Snapshot().ProtocolVersion != config.LatestProtocol {
		return params, nil
	}
	responses, ok, err := rawjson.Get(r.params, "inputResponses")
	if err != nil || !ok || len(responses) == 0 || responses[0] != '{' {
		return params, nil
	}
	return rawjson.Set(params, "inputResponses", responses)
}

// protocolMetaPrefix marks the _meta keys that describe one hop of the
// protocol (the 2026-07-28 per-request version, client info and
// capabilities). They belong to the client's connection with the proxy, not
// to the proxy's connection upstream, so they are not forwarded.
const protocolMetaPrefix = "io.modelcontextprotocol/"

// hopMeta returns meta without its per-hop protocol keys.
func hopMeta(meta json.RawMessage) (json.RawMessage, error) {
	if len(meta) == 0 || meta[0] != '{' || !bytes.Contains(meta, []byte(protocolMetaPrefix)) {
		return meta, nil
	}
	return rawjson.DeleteFunc(meta, func(key string) bool { return strings.HasPrefix(key, protocolMetaPrefix) })
}

// hopParams returns request params whose _meta has lost its per-hop
// protocol keys (hopMeta); params without such keys are returned as they
// are.
func hopParams(params json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(params, []byte(protocolMetaPrefix)) {
		return params, nil
	}
	meta, ok, err := rawjson.Get(params, "_meta")
	if err != nil || !ok {
		return params, err
	}
	hop, err := hopMeta(meta)
	if err != nil || len(hop) == len(meta) {
		return params, err
	}
	return rawjson.Set(params, "_meta", hop)
}

// IsErrorResult reports whether a raw tools/call result has isError: true.
func IsErrorResult(result json.RawMessage) bool {
	v, ok, err := rawjson.Get(result, "isError")
	return err == nil && ok && string(v) == "true"
}

// noStream is the stream of a request with no client to write to.
type noStream struct{}

func (noStream) send([]byte) error { return errStreamGone }
