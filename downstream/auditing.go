package downstream

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-proxy/mcp-proxy/audit"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// auditEvent is what the proxy knows of one decision on a tool call, a
// resource read or a prompt get.
type auditEvent struct {
	target, server string
	rule           string // the policy rule that refused it; "" when allowed
	approval       string // the approval decision, when a person was asked
	outcome        string // the metrics outcome
	args           json.RawMessage
	start          time.Time
}

// auditDecision writes one audit line (docs/operations.md#audit-log) for r: queued before the
// response goes out, never blocking. werr is the error answered, if any.
func (e *env) auditDecision(ctx context.Context, r *request, ev auditEvent, werr *wireError) {
	log := e.opts.Audit
	if log == nil {
		return
	}
	entry := audit.Entry{
		Time: ev.start, Agent: r.sess.agent.Name, Session: r.sess.id,
		Subject: r.sess.principal.subject, Token: r.sess.principal.token,
		Method: r.method, Target: ev.target, Server: ev.server,
		Decision: audit.DecisionAllow, Rule: ev.rule, Approval: ev.approval,
		Duration: time.Since(ev.start), Arguments: ev.args, RequestID: r.id,
		TraceID: e.opts.Tracer.TraceID(ctx),
	}
	switch {
	case ev.rule != "" || ev.outcome == metrics.OutcomeDenied:
		entry.Decision = audit.DecisionDeny
	default:
		entry.Outcome = ev.outcome
	}
	if werr != nil {
		entry.Error = werr.Message
	}
	log.Record(entry)
}

// auditSurface writes the audit line of a resources/read or prompts/get
// once it has its outcome: refused when it routed to no server it may
// reach (the client cannot tell a missing resource from a hidden one, and
// the line does not either), else allowed, with the upstream's outcome.
// Its prompt arguments are the line's arguments.
func (e *env) auditSurface(ctx context.Context, r *request, target string, srv *string, start time.Time, werr **wireError) {
	if e.opts.Audit == nil {
		return
	}
	ev := auditEvent{target: target, server: *srv, start: start, outcome: metrics.OutcomeOK}
	if r.method == "prompts/get" {
		ev.args, _, _ = rawjson.Get(r.params, "arguments")
	}
	switch {
	case *srv == "":
		ev.outcome = metrics.OutcomeDenied
	case *werr != nil:
		ev.outcome = metrics.OutcomeError
	}
	e.auditDecision(ctx, r, ev, *werr)
}
