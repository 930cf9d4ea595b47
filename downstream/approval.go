package downstream

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

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

// approvalInputID keys the approval question among a tools/call's input
// requests in the stateless 2026-07-28 protocol.
const approvalInputID = "mcp-proxy/approval"

// roundTripKey carries a 2026-07-28 call's input responses in its context.
type roundTripKey struct{}

type roundTrip struct {
	responses mcp.InputResponses
	state     string
}

// approve runs the approval gate of SPEC §5 for one call. It returns nil
// when the call may run, else the isError result that refuses it; or, for a
// client on the stateless 2026-07-28 protocol, where the server cannot send
// it a request, the result that asks the question as an input request
// (multi round-trip, SEP-2322).
func (p *Proxy) approve(ctx context.Context, st *sessionState, e *ToolEntry, args json.RawMessage) ([]byte, *mcp.CallToolResult) {
	a := st.agent
	if a.Approval(e.Exposed, st.approvedAlways(e.Exposed)) == filter.ApprovalRun {
		return nil, nil
	}
	if !clientCanElicit(ctx) {
		p.opts.Metrics.Approval(a.Name, "unsupported")
		return textResult(fmt.Sprintf("tool '%s' needs approval (agent '%s', autonomy %s), but this client cannot be asked: "+
			"it does not support elicitation. To allow the tool without asking, add it to agents.%s.auto_approve, "+
			"or set agents.%s.autonomy to full.", e.Exposed, a.Name, a.Autonomy(), a.Name, a.Name), true), nil
	}
	if rt, modern := ctx.Value(roundTripKey{}).(*roundTrip); modern {
		return p.approveRoundTrip(st, e, args, rt)
	}
	approvalTimeout := defaultApprovalTimeout
	if p.opts.ApprovalTimeout > 0 {
		approvalTimeout = p.opts.ApprovalTimeout
	}
	actx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	res, err := p.mcp.RequestElicitation(actx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message:         p.approvalMessage(e, args),
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
	return p.decided(st, e, decision, approvalTimeout), nil
}

// decided counts an approval decision and returns the refusal, or nil when
// the call may run.
func (p *Proxy) decided(st *sessionState, e *ToolEntry, decision string, timeout time.Duration) []byte {
	p.opts.Metrics.Approval(st.agent.Name, decision)
	switch decision {
	case "approve":
		return nil
	case "always":
		st.approveAlways(e.Exposed)
		return nil
	case "timeout":
		return textResult(fmt.Sprintf("tool '%s' was not run: nobody answered the approval request within %s", e.Exposed, timeout), true)
	case "error":
		return textResult(fmt.Sprintf("tool '%s' was not run: the approval request failed", e.Exposed), true)
	}
	return textResult(fmt.Sprintf("tool '%s' was not run: the user did not approve it (%s)", e.Exposed, decision), true)
}

// approveRoundTrip asks the question as an input request, or reads the
// answer the client sent with its retry. The request state binds the
// answer to this tool and these arguments (an HMAC with a key of this
// process), so a client cannot approve a call it was never asked about.
func (p *Proxy) approveRoundTrip(st *sessionState, e *ToolEntry, args json.RawMessage, rt *roundTrip) ([]byte, *mcp.CallToolResult) {
	state := p.approvalState(e.Exposed, args)
	if er := server.ElicitationResponse(rt.responses, approvalInputID); er != nil && hmac.Equal([]byte(rt.state), []byte(state)) {
		decision := string(er.Action)
		if er.Action == mcp.ElicitationResponseActionAccept {
			decision = acceptedDecision(er.Content)
		}
		return p.decided(st, e, decision, 0), nil
	}
	b := server.NewInputRequestBuilder(state).Elicit(approvalInputID, mcp.ElicitationParams{
		Message: p.approvalMessage(e, args), RequestedSchema: approvalSchema,
	})
	return nil, b.ToolResult()
}

// approvalState is the request state of an approval round trip.
func (p *Proxy) approvalState(tool string, args json.RawMessage) string {
	m := hmac.New(sha256.New, p.roundTripKey[:])
	m.Write([]byte(tool))
	m.Write([]byte{0})
	m.Write(withoutApproved(args))
	return hex.EncodeToString(m.Sum(nil))
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
func (p *Proxy) approvalMessage(e *ToolEntry, args json.RawMessage) string {
	shown := "{}"
	if len(args) > 0 {
		shown = p.cleanText(string(withoutApproved(args)))
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
