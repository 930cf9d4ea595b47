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

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// What happens to a tools/call, in order:
//
//  1. callTool reads the params (name, arguments, _meta) from the request's
//     bytes; nothing is decoded beyond the name.
//  2. A later round of a stateless client's parked call resumes it
//     (mrtr.go). The proxy's own tools (tool_search, call_tool,
//     mcp_resources, mcp_prompts) run here (deferred.go, seedtools.go).
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
func (p *Proxy) listTools(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	p.waitStartup(ctx)
	if r.modern && r.sess.deferred.empty() {
		r.decorated = true
		return p.viewFor(r.sess).modernList(p), nil
	}
	return p.listFor(r.sess), nil
}

// callTool answers tools/call.
func (p *Proxy) callTool(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	req, werr := readCallParams(r.params)
	if werr != nil {
		return nil, werr
	}
	if r.modern && len(req.state) > 0 {
		if state, _ := req.stateString(); isParkToken(state) {
			return p.resumeParked(ctx, r, req.name, state) // a later round of a parked call (mrtr.go)
		}
	}
	return p.forwardCall(ctx, r, req.name, req.args, req.meta)
}

// forwardCall calls one tool by name for r: the proxy's own tools, or an
// upstream tool through the call chain. call_tool comes here too, so it
// returns whatever the direct call would.
func (p *Proxy) forwardCall(ctx context.Context, r *request, name string, args, meta json.RawMessage) (json.RawMessage, *wireError) {
	p.awaitTool(ctx, name) // the own tools too: mcp_resources needs a server that offers resources
	if res, werr, own := p.ownCall(ctx, r, name, args, meta); own {
		return res, werr
	}
	entry, ok := p.Catalog().Lookup(name)
	if !ok {
		return nil, p.unknownTool(r.sess, name)
	}
	return p.callChain(ctx, &toolCall{r: r, name: name, args: args, meta: meta, entry: entry})
}

// awaitTool makes sure a tool name unknown to the catalog is not unknown
// only because the catalog lags (catchUp).
func (p *Proxy) awaitTool(ctx context.Context, name string) {
	p.catchUp(ctx, func(c *Catalog) bool {
		_, known := c.Lookup(name)
		return known
	})
}

// catchUp is what a request naming something the catalog does not know
// (known reports false) does before it answers "unknown": it brings the
// catalog up to the upstreams' latest snapshots (during the start their
// builds wait, UpstreamChanged; and an upstream's readiness is signalled
// before its snapshot arrives), and if the name is still unknown while
// upstreams are making their first connection (docs/operations.md#startup), it waits for
// them, at most startup_wait (a host calling a tool or prompt it
// remembers).
func (p *Proxy) catchUp(ctx context.Context, known func(*Catalog) bool) {
	if known(p.Catalog()) {
		return
	}
	p.Refresh()
	if !known(p.Catalog()) && p.startupPending() {
		p.waitStartup(ctx)
	}
}

// observeCall records every call once: its metric by the upstream's tool
// name and outcome, its log line (debug; warn for a failure), its audit
// line (docs/operations.md#traces) and what its trace span says of it.
func (p *Proxy) observeCall(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		start := time.Now()
		res, werr := next(ctx, c)
		if werr != nil && werr.input != nil {
			return res, werr // asked the client for input: the call goes on in a later round
		}
		if c.outcome == "" {
			c.outcome = metrics.OutcomeOK
			if werr != nil {
				c.outcome = metrics.OutcomeError
			}
		}
		p.opts.Metrics.ToolCall(c.entry.Server, c.entry.Name, c.outcome, c.elapsed)
		code := 0
		if werr != nil {
			code = werr.Code
		}
		sp := p.opts.Tracer.SpanFromContext(ctx)
		sp.SetServer(c.entry.Server)
		sp.SetPolicyRule(string(c.rule))
		sp.SetApproval(c.approval)
		sp.SetOutcome(c.outcome, code)
		p.auditDecision(ctx, c.r, auditEvent{target: c.name, server: c.entry.Server, rule: string(c.rule),
			approval: c.approval, outcome: c.outcome, args: c.args, start: start}, werr)
		ev := p.log.Debug()
		if werr != nil {
			ev = p.log.Warn()
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
func (p *Proxy) policyGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		s := c.r.sess
		rule := s.agent.Decide(c.entry.policyTool(), s.perCall)
		if rule == filter.RuleNone {
			return next(ctx, c)
		}
		c.outcome, c.rule = metrics.OutcomeDenied, rule
		p.opts.Metrics.PolicyDenial(s.agent.Name, string(rule))
		if rule.Hidden() {
			return nil, unknownTool(c.name)
		}
		return denied(c.name, rule), nil
	}
}

// quarantineGate refuses a tool that tool integrity holds (docs/security.md#tool-integrity), with
// the command that reviews it.
func (p *Proxy) quarantineGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		if !c.entry.Held {
			return next(ctx, c)
		}
		c.outcome, c.rule = metrics.OutcomeDenied, filter.RuleQuarantined
		p.opts.Metrics.PolicyDenial(c.r.sess.agent.Name, string(filter.RuleQuarantined))
		return textResult(c.entry.refusal, true), nil
	}
}

// upGate fails a call to a server that does not take requests now: no
// rate limit token is spent and no person asked about a call that cannot
// run.
func (p *Proxy) upGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		if err := p.serverUp(c.entry.Server); err != nil {
			c.outcome = metrics.OutcomeError
			return nil, err
		}
		return next(ctx, c)
	}
}

// approvalGate asks the person when the agent's autonomy wants it
// (docs/agents.md#approval, approval.go).
func (p *Proxy) approvalGate(next callHandler) callHandler {
	return func(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
		refusal, ask := p.approve(ctx, c)
		if ask != nil {
			return nil, &wireError{input: ask}
		}
		if refusal != nil {
			c.outcome = metrics.OutcomeDenied
			return refusal, nil
		}
		return next(ctx, c)
	}
}

// serverUp is nil when the server takes requests (connected, or a request
// for it waits for its connection: upstream.Snapshot.Available), else the
// error to send: it needs an OAuth login (naming the command that does it),
// or it is not connected (saying why and when the next attempt starts).
func (p *Proxy) serverUp(server string) *wireError {
	g := p.gen()
	up, cfg := g.ups[server], g.cfg.Servers[server]
	if up == nil || cfg == nil {
		return p.serverDown(server, up)
	}
	switch snap := up.Snapshot(); {
	case snap.Available():
		return nil
	case snap.State == upstream.StateNeedsAuth && snap.Err != nil:
		return needsAuth(server, p.errText(snap.Err.Error()))
	}
	return p.serverDown(server, up)
}

// needsAuth is the error of a request to a server that needs an OAuth
// login; why names the command that does it.
func needsAuth(server, why string) *wireError {
	return errorf(codeServerError, "MCP server '%s' needs authorization: %s", server, why)
}

// send is the chain's last step: it sends the call upstream and waits for
// its outcome, or parks it for a stateless HTTP client (mrtr.go).
func (p *Proxy) send(ctx context.Context, c *toolCall) (json.RawMessage, *wireError) {
	g := p.gen()
	up, cfg := g.ups[c.entry.Server], g.cfg.Servers[c.entry.Server]
	if up == nil || cfg == nil {
		c.outcome = metrics.OutcomeError
		return nil, notConnected(c.entry.Server)
	}
	meta, progress := p.relay.progress.open(c.r, c.entry.Server, c.meta)
	args := c.args
	if c.upArgs != nil {
		args = c.upArgs
	}
	params, err := callParams(c.entry.Name, withoutApproved(args), meta)
	if err != nil {
		progress.close()
		c.outcome = metrics.OutcomeError
		return nil, errorf(codeInvalidParams, "invalid tools/call params: %s", sanitize.Error(err.Error()))
	}
	run := func(ctx context.Context) (json.RawMessage, *wireError) {
		defer progress.close()
		slots, refusal, werr := p.holdSlot(ctx, c, cfg.Timeout.D())
		if refusal != nil || werr != nil {
			return refusal, werr
		}
		if slots != nil {
			defer slots.Release()
		}
		return p.runCall(ctx, c, up, cfg.Timeout.D(), params)
	}
	if parkable(c.r) {
		return p.startParked(ctx, c.r, c.entry.Exposed, cfg.Timeout.D(), progress, run)
	}
	return run(ctx)
}

// runCall sends the call's params upstream and waits for the outcome.
func (p *Proxy) runCall(ctx context.Context, c *toolCall, up Upstream, timeout time.Duration, params json.RawMessage) (json.RawMessage, *wireError) {
	end := p.relay.calls.begin(c.entry.Server, c.r)
	defer end()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	result, err := up.Request(cctx, "tools/call", params)
	c.elapsed = time.Since(start)
	var werr *wireError
	c.outcome, werr = p.classify(c.entry, result, err, ctx, cctx, timeout)
	if werr != nil {
		return nil, werr
	}
	return p.rewriteResult(c.r.sess.agent.Name, c.entry.Server, result, c.r.linkOK()), nil
}

// classify maps a call's error to its metric outcome and downstream error.
func (p *Proxy) classify(entry *ToolEntry, result json.RawMessage, err error, ctx, cctx context.Context, timeout time.Duration) (string, *wireError) {
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
		return metrics.OutcomeError, &wireError{Code: rpcErr.Code, Message: p.errText(rpcErr.Message), Data: p.errorData(rpcErr.Data)}
	case invalidResult(err):
		return metrics.OutcomeError, errorf(codeInternal, "%s", p.errText(err.Error()))
	case errors.Is(err, upstream.ErrNeedsAuth):
		return metrics.OutcomeError, needsAuth(entry.Server, p.errText(err.Error()))
	case errors.Is(err, upstream.ErrNotConnected):
		return metrics.OutcomeError, p.notSent(entry.Server, err)
	case errors.Is(err, upstream.ErrConnectionLost):
		// The call may or may not have run: it is never replayed (docs/operations.md#reconnection).
		return metrics.OutcomeError, &wireError{Code: codeServerError, Message: p.errText(fmt.Sprintf(
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
			Message: p.errText(fmt.Sprintf("MCP server '%s': %v", entry.Server, err))}
	}
}

// invalidResult reports whether err is an upstream's answer with a result
// that is not a JSON object: what the upstream broke is the proxy's
// internal error to its client (-32603), which names the server, never a
// result a strict client would refuse.
func invalidResult(err error) bool {
	var invalid *upstream.InvalidResultError
	return errors.As(err, &invalid)
}

// maxErrorData bounds the upstream error data passed downstream.
const maxErrorData = 64 << 10

// errorData is an upstream error's data as it may go downstream: sanitized
// like every error text (docs/protocol.md#errors); dropped when too large or when
// sanitizing left it invalid. Clients act on it (URL elicitation, -32042,
// carries its elicitations there).
func (p *Proxy) errorData(data json.RawMessage) json.RawMessage {
	if len(data) == 0 || len(data) > maxErrorData {
		return nil
	}
	clean := json.RawMessage(p.cleanText(string(data)))
	if !json.Valid(clean) {
		return nil
	}
	return clean
}

func unknownTool(name string) *wireError {
	return &wireError{Code: codeInvalidParams, Message: "unknown tool: " + sanitize.Error(name)}
}

// unknownTool is the error of a name no server lists. When the name has the
// prefix of a server the session's agent is granted and that server is
// down without ever having listed its tools, the error says it is down and
// why instead: "unknown tool" would hide the cause. A server the agent is
// not granted stays unknown (docs/agents.md#the-policy-rules, rule 1).
func (p *Proxy) unknownTool(s *session, name string) *wireError {
	g := p.gen()
	style := p.style()
	for _, srv := range g.serverNames() {
		cfg := g.cfg.Servers[srv]
		prefix := style.NamePrefix(cfg.PrefixValue())
		if prefix == "" || !strings.HasPrefix(name, prefix) || !s.agent.Granted(srv) {
			continue
		}
		if werr := p.serverUp(srv); werr != nil {
			return werr
		}
	}
	return unknownTool(name)
}

func notConnected(server string) *wireError {
	return &wireError{Code: codeServerError, Message: fmt.Sprintf("MCP server '%s' is not connected", server)}
}

// serverDown is the error of a request for a server whose snapshot says it
// would be refused at once (upstream.Snapshot.Available): why, and when the
// next attempt starts.
func (p *Proxy) serverDown(server string, up Upstream) *wireError {
	if up == nil {
		return notConnected(server)
	}
	if de := up.Snapshot().DownError(); de != nil {
		de.Server = server // a fresh value: the snapshot of a fake may not name it
		return p.notSent(server, de)
	}
	return notConnected(server)
}

// notSent is the error of a request the upstream refused without sending
// it (err matches upstream.ErrNotConnected): the *upstream.DownError's text,
// which says why and when the next attempt starts.
func (p *Proxy) notSent(server string, err error) *wireError {
	var de *upstream.DownError
	if errors.As(err, &de) {
		return &wireError{Code: codeServerError, Message: p.errText(de.Error())}
	}
	return notConnected(server)
}

// callRequest is the part of tools/call params the proxy reads: raw
// sub-slices of the request, never decoded beyond the name.
type callRequest struct {
	name  string
	args  json.RawMessage
	meta  json.RawMessage
	state json.RawMessage // requestState (a stateless client's later round, mrtr.go)
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
	ms, err := rawjson.Members(params)
	if err != nil {
		return c, errorf(codeInvalidParams, "invalid params: %s", err.Error())
	}
	named := false
	for _, m := range ms {
		v := params[m.ValueStart:m.ValueEnd]
		switch m.Key {
		case "name":
			name, err := rawjson.Unquote(v)
			if err != nil {
				return c, errorf(codeInvalidParams, "invalid params: the tool name must be a string")
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
		}
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

// rewriteResult applies the result rewrites of docs/resources.md#blobs and docs/protocol.md#fidelity: blobs to
// files, Unicode TAG characters out of text. Both return the input slice when
// there is nothing to change, which is the common case.
func (p *Proxy) rewriteResult(agent, server string, result json.RawMessage, linkOK bool) json.RawMessage {
	if p.opts.Blobs != nil {
		out, report, err := p.opts.Blobs.Rewrite(agent, result, linkOK)
		if err != nil {
			p.log.Warn().Str("server", server).Err(err).Msg("blob rewrite failed; result passed through")
		} else {
			result = out
			p.recordBlobs(server, report)
		}
	}
	return stripResultTags(compactLines(result))
}

// CallTool calls one tool for agent outside any MCP session (the `call`
// verb). It follows the same path as a tools/call from a client, as a
// client that can be asked nothing.
func (p *Proxy) CallTool(ctx context.Context, agent string, perCall []string, name string, args json.RawMessage) (json.RawMessage, error) {
	a, err := p.resolveAgent(agent)
	if err != nil {
		return nil, err
	}
	s := newSession("", "cli", a, perCall)
	defer s.close()
	r := &request{sess: s, id: json.RawMessage("0"), method: "tools/call", out: noStream{}}
	result, werr := p.forwardCall(withRequest(ctx, r), r, name, args, nil)
	if werr != nil {
		return nil, werr
	}
	return result, nil
}

// noStream is the stream of a request with no client to write to.
type noStream struct{}

func (noStream) send([]byte) error { return errStreamGone }
