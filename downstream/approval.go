package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// defaultApprovalTimeout bounds how long the proxy waits for a person to
// answer an approval question (SPEC §5); Options.ApprovalTimeout overrides.
const defaultApprovalTimeout = 300 * time.Second

// approvalArgsLimit cuts the arguments shown in an approval question.
const approvalArgsLimit = 1000

// approvalSchema is the form an approval question asks for (SPEC §5).
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{"type": "string", "enum": []string{"approve", "deny", "always"}},
	},
	"required": []string{"decision"},
}

// approve runs the approval gate of SPEC §5 for one call. It returns nil when
// the call may run, else the isError result that refuses it.
func (p *Proxy) approve(ctx context.Context, st *sessionState, e *ToolEntry, args json.RawMessage) []byte {
	a := st.agent
	if a.Approval(e.Exposed, st.approvedAlways(e.Exposed)) == filter.ApprovalRun {
		return nil
	}
	if !clientCanElicit(ctx) {
		p.opts.Metrics.Approval(a.Name, "unsupported")
		return textResult(fmt.Sprintf("tool '%s' needs approval (agent '%s', autonomy %s), but this client cannot be asked: "+
			"it does not support elicitation. To allow the tool without asking, add it to agents.%s.auto_approve, "+
			"or set agents.%s.autonomy to full.", e.Exposed, a.Name, a.Autonomy(), a.Name, a.Name), true)
	}
	approvalTimeout := defaultApprovalTimeout
	if p.opts.ApprovalTimeout > 0 {
		approvalTimeout = p.opts.ApprovalTimeout
	}
	actx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	res, err := p.mcp.RequestElicitation(actx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message:         approvalMessage(e, args),
		RequestedSchema: approvalSchema,
	}})
	decision := "error"
	switch {
	case err != nil && errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		decision = "timeout"
	case err != nil:
		p.log.Warn().Str("tool", e.Exposed).Str("error", sanitize.Error(err.Error())).Msg("approval request failed")
	case res.Action == mcp.ElicitationResponseActionAccept:
		decision = acceptedDecision(res.Content)
	default:
		decision = string(res.Action) // decline or cancel
	}
	p.opts.Metrics.Approval(a.Name, decision)
	switch decision {
	case "approve":
		return nil
	case "always":
		st.approveAlways(e.Exposed)
		return nil
	case "timeout":
		return textResult(fmt.Sprintf("tool '%s' was not run: nobody answered the approval request within %s", e.Exposed, approvalTimeout), true)
	case "error":
		return textResult(fmt.Sprintf("tool '%s' was not run: the approval request failed", e.Exposed), true)
	}
	return textResult(fmt.Sprintf("tool '%s' was not run: the user did not approve it (%s)", e.Exposed, decision), true)
}

// acceptedDecision reads the decision of an accepted approval form; anything
// but approve or always counts as deny.
func acceptedDecision(content any) string {
	m, ok := content.(map[string]any)
	if !ok {
		return "deny"
	}
	switch d, _ := m["decision"].(string); d {
	case "approve", "always":
		return d
	}
	return "deny"
}

// approvalMessage names the tool, its server and its arguments, redacted
// and cut (SPEC §5).
func approvalMessage(e *ToolEntry, args json.RawMessage) string {
	shown := "{}"
	if len(args) > 0 {
		shown = sanitize.Text(string(withoutApproved(args)))
	}
	if r := []rune(shown); len(r) > approvalArgsLimit {
		shown = string(r[:approvalArgsLimit]) + "…"
	}
	return fmt.Sprintf("Allow the tool %s (tool %q of MCP server %q) to run with these arguments?\n%s\n"+
		"Answer approve (this call), always (for the rest of this session) or deny.", e.Exposed, e.Name, e.Server, shown)
}

// withoutApproved removes a top-level "approved" argument, so that a model
// cannot approve its own call (seed). Arguments that are not an object pass.
func withoutApproved(args json.RawMessage) json.RawMessage {
	if len(args) == 0 || args[0] != '{' {
		return args
	}
	out, err := rawjson.Delete(args, "approved")
	if err != nil {
		return args
	}
	return out
}
