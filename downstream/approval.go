package downstream

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// defaultApprovalTimeout bounds how long the proxy waits for a person to
// answer an approval question (docs/agents.md#approval); Options.ApprovalTimeout overrides.
const defaultApprovalTimeout = 300 * time.Second

// approvalArgsLimit cuts the arguments shown in an approval question.
const approvalArgsLimit = 1000

// approvalSchema is the form an approval question asks for (docs/agents.md#approval).
const approvalSchema = `{"type":"object","properties":{"decision":{"type":"string","enum":["approve","deny","always"]}},"required":["decision"]}`

// approvalInputID keys the approval question among a tools/call's input
// requests in the stateless 2026-07-28 protocol.
const approvalInputID = "mcp-proxy/approval"

// approvalStatePrefix marks the request states of approval round trips.
const approvalStatePrefix = "px-approval-"

// approvalOf is the agent's approval of call c. The session's "always"
// approvals are asked only when they decide it; with a Redis store, a NO
// read from the replica's copy of the session is read again from Redis
// first (sharedState.reread), and the error is the store's when that
// read fails.
func approvalOf(ctx context.Context, c *toolCall) (filter.Approval, error) {
	a, t, state := c.r.sess.agent, c.entry.policyTool(), c.r.sess.state
	if got := a.ApprovalOf(t, false); got == filter.ApprovalRun {
		return got, nil
	}
	if state.ApprovedAlways(c.entry.Exposed) {
		return a.ApprovalOf(t, true), nil
	}
	if sh, ok := state.(*sharedState); ok {
		if err := sh.reread(ctx); err != nil {
			return 0, err
		}
	}
	return a.ApprovalOf(t, state.ApprovedAlways(c.entry.Exposed)), nil
}

// approve runs the approval gate of docs/agents.md#approval for a call
// approvalOf does not run as it is. It returns nil when the call may run,
// else the isError result that refuses it; or, for a stateless client
// over HTTP, which cannot be sent a request, the input_required result
// that asks the question (a multi round-trip); or the error of a
// shared-state store that did not answer.
func (tc *toolCalls) approve(ctx context.Context, c *toolCall) (refusal []byte, ask *inputRequired, werr *wireError) {
	r, a := c.r, c.r.sess.agent
	if !r.caps.elicitation {
		tc.opts.Metrics.Approval(a.Name, "unsupported")
		c.approval = "unsupported"
		return textResult(fmt.Sprintf("tool '%s' needs approval (agent '%s', autonomy %s), but this client cannot be asked: "+
			"it does not support elicitation. To allow the tool without asking, add it to agents.%s.auto_approve, "+
			"or set agents.%s.autonomy to full.", c.entry.Exposed, a.Name, a.Autonomy(), a.Name, a.Name), true), nil, nil
	}
	timeout := tc.approvalTimeout()
	if parkable(r) {
		return tc.approveRoundTrip(ctx, c, timeout)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := r.sess.ask(actx, r, "elicitation/create", tc.approvalQuestion(c))
	decision := "error"
	switch {
	case err != nil && errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		decision = "timeout"
	case err != nil:
		tc.log.Warn().Str("tool", c.entry.Exposed).Str("error", sanitize.Error(err.Error())).Msg("approval request failed")
	default:
		decision = decisionOf(res)
	}
	return tc.decided(c, decision, timeout), nil, nil
}

// decided counts an approval decision and returns the refusal, or nil when
// the call may run.
func (tc *toolCalls) decided(c *toolCall, decision string, timeout time.Duration) []byte {
	tc.opts.Metrics.Approval(c.r.sess.agent.Name, decision)
	c.approval = decision
	tool := c.entry.Exposed
	switch decision {
	case "approve":
		return nil
	case "always":
		c.r.sess.state.ApproveAlways(tool)
		return nil
	case "timeout":
		return textResult(fmt.Sprintf("tool '%s' was not run: nobody answered the approval request within %s", tool, timeout), true)
	case "error":
		return textResult(fmt.Sprintf("tool '%s' was not run: the approval request failed", tool), true)
	}
	return textResult(fmt.Sprintf("tool '%s' was not run: the user did not approve it (%s)", tool, decision), true)
}

// decisionOf reads an elicitation result: accept with approve or always
// runs the call; accept with anything else counts as deny; decline and
// cancel are themselves.
func decisionOf(result json.RawMessage) string {
	var res struct {
		Action  string `json:"action"`
		Content struct {
			Decision string `json:"decision"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &res) != nil {
		return "error"
	}
	switch res.Action {
	case "accept":
		if d := res.Content.Decision; d == "approve" || d == "always" {
			return d
		}
		return "deny"
	case "decline", "cancel":
		return res.Action
	}
	return "error"
}

// approvalQuestion is the elicitation/create params of an approval
// question: a message naming the tool, its server and its arguments
// (redacted and cut, docs/agents.md#approval), and the decision form.
func (tc *toolCalls) approvalQuestion(c *toolCall) json.RawMessage {
	shown := "{}"
	if len(c.args) > 0 {
		shown = tc.cleanText(string(withoutApproved(c.args)))
	}
	if r := []rune(shown); len(r) > approvalArgsLimit {
		shown = string(r[:approvalArgsLimit]) + "…"
	}
	msg := fmt.Sprintf("Allow the tool %s (tool %q of MCP server %q) to run with these arguments?\n%s\n"+
		"Answer approve (this call), always (for the rest of this session) or deny.", c.entry.Exposed, c.entry.Name, c.entry.Server, shown)
	return json.RawMessage(`{"message":` + string(rawjson.String(msg)) + `,"requestedSchema":` + approvalSchema + `}`)
}

// approveRoundTrip asks a stateless client through an input request, or
// reads its answer from the retry. The request state is a random token,
// good once, bound to the agent, the client, the tool and a digest of the
// arguments, and only until the approval timeout: an answer cannot be
// replayed, moved to another call, or used by another client. With a Redis
// store the states are kept there, so the retry may reach any replica and
// is good once across all of them.
func (tc *toolCalls) approveRoundTrip(ctx context.Context, c *toolCall, timeout time.Duration) ([]byte, *inputRequired, *wireError) {
	r := c.r
	key := approvalKey{agent: r.sess.agent.Name, client: r.sess.principal, tool: c.entry.Exposed, args: argsDigest(c.args)}
	shared := tc.opts.Store.Approvals()
	if state, _ := stringMember(r.params, "requestState"); strings.HasPrefix(state, approvalStatePrefix) {
		var err error
		if shared != nil {
			err = takeShared(ctx, shared, state, key, time.Now())
			if errors.Is(err, store.ErrUnavailable) {
				c.outcome = metrics.OutcomeError
				return nil, nil, storeError(err)
			}
		} else {
			err = tc.approvals.take(state, key, time.Now())
		}
		if err != nil {
			tc.opts.Metrics.Approval(r.sess.agent.Name, "error")
			c.approval = "error"
			return textResult(fmt.Sprintf("tool '%s' was not run: %s; call the tool again to be asked anew", c.entry.Exposed, err), true), nil, nil
		}
		decision := "cancel"
		if resp, ok, _ := rawjson.Get(r.params, "inputResponses"); ok {
			if ans, ok, _ := rawjson.Get(resp, approvalInputID); ok {
				decision = decisionOf(ans)
			}
		}
		return tc.decided(c, decision, timeout), nil, nil
	}
	var state string
	if shared != nil {
		state = approvalStatePrefix + randid.Hex(16)
		if err := shared.Issue(ctx, state, key.binding(time.Now().Add(timeout)), timeout); err != nil {
			c.outcome = metrics.OutcomeError
			return nil, nil, storeError(err)
		}
	} else {
		state = tc.approvals.issue(key, time.Now().Add(timeout))
	}
	question := `{"method":"elicitation/create","params":` + string(tc.approvalQuestion(c)) + `}`
	return nil, newInputRequired(map[string]json.RawMessage{approvalInputID: json.RawMessage(question)}, state), nil
}

// sharedBinding is what the store keeps of an approval state: what it is
// bound to and when it expires.
type sharedBinding struct {
	Agent   string `json:"agent"`
	Subject string `json:"subject,omitempty"`
	Token   int    `json:"token,omitempty"`
	Tool    string `json:"tool"`
	Args    string `json:"args"`
	Expires int64  `json:"expires"` // Unix milliseconds
}

// binding encodes k with its expiry for the store.
func (k approvalKey) binding(expires time.Time) []byte {
	b, _ := json.Marshal(sharedBinding{Agent: k.agent, Subject: k.client.subject, Token: k.client.token,
		Tool: k.tool, Args: k.args, Expires: expires.UnixMilli()}) // strings and numbers: never fails
	return b
}

// takeShared is approvalStates.take on the store: the state is spent once
// across replicas. Unlike in memory, a state presented for another call is
// spent too (taking and comparing is one atomic GETDEL).
func takeShared(ctx context.Context, shared *store.Approvals, state string, key approvalKey, now time.Time) error {
	raw, ok, err := shared.Take(ctx, state)
	if err != nil {
		return err
	}
	var b sharedBinding
	if !ok || json.Unmarshal(raw, &b) != nil {
		return errors.New("the approval answer is unknown or was already used")
	}
	if b.Agent != key.agent || b.Subject != key.client.subject || b.Token != key.client.token || b.Tool != key.tool || b.Args != key.args {
		return errors.New("the approval answer belongs to another call")
	}
	if !now.Before(time.UnixMilli(b.Expires)) {
		return errors.New("the approval answer came after the approval timeout")
	}
	return nil
}

// inputRequired is a 2026-07-28 input_required result: the request needs
// the client's answers to input requests first (a multi round-trip,
// docs/protocol.md#requests-from-servers), and its retry carries them with
// the request state. It is not an error. To the route it is a result like
// any other; the call chain tells it apart (toolCall.input): a call that
// asked is not over.
type inputRequired struct{ result json.RawMessage }

// resultOr is the input_required result when there is one, else res.
func (in *inputRequired) resultOr(res json.RawMessage) json.RawMessage {
	if in != nil {
		return in.result
	}
	return res
}

// newInputRequired is an input_required result asking the client for the
// given input requests, with the state its retry must carry.
func newInputRequired(reqs map[string]json.RawMessage, state string) *inputRequired {
	b, _ := json.Marshal(reqs) // raw values, valid JSON: never fails
	out := []byte(`{"content":[],"inputRequests":`)
	out = append(out, b...)
	out = append(out, `,"requestState":`...)
	out = append(out, rawjson.String(state)...)
	return &inputRequired{result: append(out, `,"resultType":"input_required"}`...)}
}

// argsDigest is the SHA-256 of a call's arguments without the "approved"
// key (which never reaches the upstream).
func argsDigest(args json.RawMessage) string {
	h := sha256.Sum256(withoutApproved(args))
	return hex.EncodeToString(h[:])
}

// approvalKey is what an approval state is bound to.
type approvalKey struct {
	agent      string
	client     principal
	tool, args string
}

// approvalStates holds the request states of approval round trips that
// wait for their answer: each good once, until it expires. Its memory is
// bounded: at most maxApprovalStates open states, and at most
// maxApprovalStatesPerClient of them for one client (agent and principal).
// Past a bound the oldest state goes (of all, resp. of that client), and its
// answer then asks anew. The share per client keeps one client from
// pushing every other client's open questions out: a client that floods
// the proxy with calls needing approval only forgets its own, until more
// than maxApprovalStates/maxApprovalStatesPerClient clients do so at once.
// Clients the transport cannot tell apart (an agent with no token) share
// one share. Expired states are dropped as new ones come.
type approvalStates struct {
	mu      sync.Mutex
	m       map[string]*approvalState
	all     list.List                     // every open state (*approvalState), oldest first
	clients map[approvalClient]*list.List // each client's open states, oldest first
}

// approvalClient is whom an approval state's share is counted against.
type approvalClient struct {
	agent  string
	client principal
}

type approvalState struct {
	state    string
	key      approvalKey
	expires  time.Time
	all, own *list.Element // its places in approvalStates.all and its client's list
}

const (
	// maxApprovalStates bounds the open questions kept in all (10,000 is
	// far beyond what people answer within the approval timeout).
	maxApprovalStates = 10000
	// maxApprovalStatesPerClient bounds one client's open questions: a
	// tenth of the whole, so at least ten clients must flood together to
	// push out another client's question.
	maxApprovalStatesPerClient = maxApprovalStates / 10
)

// issue records a new state for key, valid until expires.
func (a *approvalStates) issue(key approvalKey, expires time.Time) string {
	st := &approvalState{state: approvalStatePrefix + randid.Hex(16), key: key, expires: expires}
	c := approvalClient{agent: key.agent, client: key.client}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m, a.clients = map[string]*approvalState{}, map[approvalClient]*list.List{}
	}
	now := time.Now()
	for e := a.all.Front(); e != nil && !now.Before(e.Value.(*approvalState).expires); e = a.all.Front() {
		a.drop(e.Value.(*approvalState))
	}
	own := a.clients[c]
	if own == nil {
		own = list.New()
		a.clients[c] = own
	}
	if own.Len() >= maxApprovalStatesPerClient {
		a.drop(own.Front().Value.(*approvalState))
	}
	if len(a.m) >= maxApprovalStates {
		a.drop(a.all.Front().Value.(*approvalState))
	}
	st.all, st.own = a.all.PushBack(st), own.PushBack(st)
	a.m[st.state] = st
	return st.state
}

// drop forgets st. a.mu must be held.
func (a *approvalStates) drop(st *approvalState) {
	delete(a.m, st.state)
	a.all.Remove(st.all)
	c := approvalClient{agent: st.key.agent, client: st.key.client}
	if own := a.clients[c]; own != nil {
		own.Remove(st.own)
		if own.Len() == 0 {
			delete(a.clients, c)
		}
	}
}

// take uses up state for key: an error says why it is not good.
func (a *approvalStates) take(state string, key approvalKey, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.m[state]
	switch {
	case !ok:
		return errors.New("the approval answer is unknown or was already used")
	case st.key != key:
		return errors.New("the approval answer belongs to another call")
	}
	a.drop(st)
	if !now.Before(st.expires) {
		return errors.New("the approval answer came after the approval timeout")
	}
	return nil
}

// withoutApproved removes a top-level "approved" argument, so that a model
// cannot approve its own call. Arguments that are not an object pass,
// and so do, without a walk, those that cannot hold the key: no "approved"
// in their bytes and no escape that could spell it.
func withoutApproved(args json.RawMessage) json.RawMessage {
	if len(args) == 0 || args[0] != '{' {
		return args
	}
	if !bytes.Contains(args, []byte(`"approved"`)) && bytes.IndexByte(args, '\\') < 0 {
		return args
	}
	out, err := rawjson.Delete(args, "approved")
	if err != nil {
		return args
	}
	return out
}

// approvalTimeout bounds an approval question: Options.ApprovalTimeout, else
// defaultApprovalTimeout.
func (tc *toolCalls) approvalTimeout() time.Duration {
	if tc.opts.ApprovalTimeout > 0 {
		return tc.opts.ApprovalTimeout
	}
	return defaultApprovalTimeout
}
