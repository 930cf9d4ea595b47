package downstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Server requests to stateless clients (SPEC §10). A client of the stateless
// 2026-07-28 protocol over HTTP has no stream on which the proxy could send
// it a request. When an upstream asks for sampling, elicitation or roots
// during such a client's call, the call is parked: it goes on running
// upstream, detached from the client's HTTP request, while the proxy
// answers that request with an input_required result carrying the
// upstream's request and a request state naming the parked call. The client
// retries the tools/call with its answer; the proxy hands the answer to the
// upstream and waits again, for the result or for the next request.
//
// The request state is a random token known to this process only, valid for
// the agent and tool it was issued for, until the call ends or has waited
// longer than the server's timeout for the client's answer. Replicas behind
// a load balancer do not share parked calls: such a retry must reach the
// same replica (the state is unknown elsewhere, and the client is told to
// call again).
//
// A parked call's progress goes to whichever request is waiting on it, with
// that request's progress token; while none is, the latest value is kept.

// parkPrefix marks the request states of parked calls (approval round trips
// use an HMAC, which never has it).
const parkPrefix = "px-park-"

// parkedKey carries a parked call in its upstream request's context, so that
// a server request over an HTTP upstream (whose context derives from the
// call's) finds it exactly.
type parkedKey struct{}

// inputAsk is one upstream request waiting for the client's answer.
type inputAsk struct {
	key       string // its id among the round's input requests
	method    string
	req       mcp.InputRequest
	answer    chan inputAnswer // buffered: the asker may have given up
	abandoned atomic.Bool      // the asker gave up: the question is not put to the client
}

type inputAnswer struct {
	result json.RawMessage
	err    error
}

// parkedCall is a stateless client's tools/call that may span rounds.
type parkedCall struct {
	agent    string
	tool     string // what the client asked for: a tool's exposed name, or a method and its target
	caps     mcp.ClientCapabilities
	timeout  time.Duration  // how long the call may wait for the client's answer
	progress *progressRoute // the call's progress, or nil

	asks   chan *inputAsk // server requests raised during the call
	done   chan struct{}  // closed when the call has its outcome
	result json.RawMessage
	werr   *wireError
	cancel context.CancelFunc

	mu      sync.Mutex
	asked   *inputAsk   // the request the client was last asked to answer
	expire  *time.Timer // ends a call whose client does not come back
	askSeq  int
	counted bool // holds one of its agent's maxParkedPerAgent places
}

// maxParkedPerAgent bounds the calls of one agent's stateless clients that
// wait for an answer (they run on without any client connection): beyond
// it an upstream's request is refused and the call goes on without it.
const maxParkedPerAgent = 64

// parkTable holds the parked calls between rounds, by request state, and
// counts each agent's calls that have parked and not ended.
type parkTable struct {
	mu      sync.Mutex
	m       map[string]*parkedCall
	byAgent map[string]int
}

// reserve counts pc among its agent's parked calls, once; false when the
// agent has maxParkedPerAgent already.
func (t *parkTable) reserve(pc *parkedCall) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.counted {
		return true
	}
	if t.byAgent == nil {
		t.byAgent = map[string]int{}
	}
	if t.byAgent[pc.agent] >= maxParkedPerAgent {
		return false
	}
	t.byAgent[pc.agent]++
	pc.counted = true
	return true
}

// release gives back pc's place (its call ended).
func (t *parkTable) release(pc *parkedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.counted {
		pc.counted = false
		if t.byAgent[pc.agent]--; t.byAgent[pc.agent] <= 0 {
			delete(t.byAgent, pc.agent)
		}
	}
}

func (t *parkTable) put(token string, pc *parkedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*parkedCall{}
	}
	t.m[token] = pc
}

// take removes and returns the parked call of token when it was issued for
// this agent and tool.
func (t *parkTable) take(token, agent, tool string) *parkedCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc := t.m[token]
	if pc == nil || pc.agent != agent || pc.tool != tool {
		return nil
	}
	delete(t.m, token)
	return pc
}

// drop removes token's call and reports whether it was still there (a
// retry's take may have come first).
func (t *parkTable) drop(token string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[token]
	delete(t.m, token)
	return ok
}

func isParkToken(state string) bool { return strings.HasPrefix(state, parkPrefix) }

// parkable reports whether a call may be parked: a 2026-07-28 request
// without a session to send server requests on.
func parkable(ctx context.Context, st *sessionState) bool {
	rt, _ := ctx.Value(roundTripKey{}).(*roundTrip)
	return rt != nil && st.session() == nil
}

// startParked runs c detached from the client's request and waits for its
// first round.
func (p *Proxy) startParked(ctx context.Context, c *upstreamCall) (json.RawMessage, *wireError) {
	var caps mcp.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientCapabilities != nil {
		caps = *info.ClientCapabilities
	}
	return p.startParkedJob(ctx, c.st, c.entry.Exposed, caps, c.timeout, c.progress,
		func(cctx context.Context) (json.RawMessage, *wireError) { return p.runCall(cctx, c) })
}

// startParkedJob runs job for a stateless request of st, detached from the
// client's request, and waits for its first round. key names what the
// client asked for; a retry must name it again.
func (p *Proxy) startParkedJob(ctx context.Context, st *sessionState, key string, caps mcp.ClientCapabilities,
	timeout time.Duration, progress *progressRoute, job func(context.Context) (json.RawMessage, *wireError)) (json.RawMessage, *wireError) {
	pc := &parkedCall{
		agent:    st.agent.Name,
		tool:     key,
		caps:     caps,
		timeout:  timeout,
		progress: progress,
		asks:     make(chan *inputAsk, 1),
		done:     make(chan struct{}),
	}
	st.setParked(pc)
	cctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), parkedKey{}, pc))
	pc.cancel = cancel
	go func() {
		defer cancel()
		pc.result, pc.werr = job(cctx)
		close(pc.done)
		pc.mu.Lock()
		if pc.expire != nil {
			pc.expire.Stop() // the state lives on for parkGrace, not the result for the timeout
		}
		pc.mu.Unlock()
		p.parked.release(pc)
	}()
	return p.awaitRound(ctx, pc)
}

// awaitRound waits, for one client request, until the call ends or needs
// the client's answer to a server request.
func (p *Proxy) awaitRound(ctx context.Context, pc *parkedCall) (json.RawMessage, *wireError) {
	for {
		select {
		case <-pc.done:
			pc.progress.detach() // nothing more reaches this request once it answers
			return pc.result, pc.werr
		case ask := <-pc.asks:
			if ask.abandoned.Load() {
				continue // its upstream request gave up while it waited to be asked
			}
			return p.park(pc, ask)
		case <-ctx.Done():
			// The client closed its request: the call is cancelled upstream.
			pc.cancel()
			select {
			case <-pc.done:
			case <-time.After(progressFlushLimit):
			}
			pc.progress.detach()
			return nil, &wireError{Code: codeServerError, Message: "request cancelled"}
		}
	}
}

// park answers the waiting request with ask as an input request and keeps
// the call for the client's retry.
func (p *Proxy) park(pc *parkedCall, ask *inputAsk) (json.RawMessage, *wireError) {
	pc.progress.detach()
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	token := parkPrefix + hex.EncodeToString(b[:])
	pc.mu.Lock()
	pc.asked = ask
	// The client has as long to answer as the call has to run; then
	// the call ends and its state is forgotten.
	pc.expire = time.AfterFunc(pc.timeout, func() {
		if p.parked.drop(token) { // not when a retry took it first
			pc.cancel()
		}
	})
	pc.mu.Unlock()
	p.parked.put(token, pc)
	go func() { // forget the state once the call has ended anyway
		<-pc.done
		time.AfterFunc(parkGrace, func() { p.parked.drop(token) })
	}()
	return nil, &wireError{input: &mcp.CallToolResult{
		Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
		MultiRoundTripResult: mcp.MultiRoundTripResult{
			InputRequests: mcp.InputRequests{ask.key: ask.req},
			RequestState:  token,
		},
	}}
}

// parkGrace is how long the state of a call that ended while its client was
// away stays valid, so that the client's retry still gets the outcome.
const parkGrace = time.Minute

// resumeParked is a later round of a parked call: it hands the client's
// answer to the upstream and waits again.
func (p *Proxy) resumeParked(ctx context.Context, st *sessionState, name string, meta json.RawMessage, rt *roundTrip) (json.RawMessage, *wireError) {
	pc := p.parked.take(rt.state, st.agent.Name, name)
	if pc == nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "invalid requestState: the call it belongs to has ended, " +
			"waited too long for this answer, or ran on another proxy instance; call the tool again"}
	}
	pc.mu.Lock()
	ask := pc.asked
	pc.asked = nil
	if pc.expire != nil {
		pc.expire.Stop()
	}
	pc.mu.Unlock()
	direct, _ := ctx.Value(directKey{}).(func([]byte))
	pc.progress.attach(ctx, direct, progressTokenOf(meta))
	if ask != nil {
		var ans inputAnswer
		if resp, ok := rt.responses[ask.key]; ok {
			if b, err := json.Marshal(resp); err == nil && string(b) != "null" {
				ans.result = b
			}
		}
		if ans.result == nil {
			ans.err = refuse(codeRefused, "the client did not answer the %s request", ask.method)
		}
		ask.answer <- ans
	}
	return p.awaitRound(ctx, pc)
}

// progressTokenOf returns a request's progress token, decoded with numbers
// kept exact, or nil.
func progressTokenOf(meta json.RawMessage) any {
	if len(meta) == 0 {
		return nil
	}
	var m struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(meta, &m) != nil || len(m.Token) == 0 {
		return nil
	}
	tok, err := decodeNumberKept(m.Token)
	if err != nil {
		return nil
	}
	return tok
}

// parkedFor finds the parked call a server request of upstream srv belongs
// to: from its context (HTTP upstreams), else the one call in flight to srv
// when that call is parked.
func (p *Proxy) parkedFor(ctx context.Context, srv string) *parkedCall {
	if pc, _ := ctx.Value(parkedKey{}).(*parkedCall); pc != nil {
		return pc
	}
	if server.ClientSessionFromContext(ctx) != nil {
		return nil // the request names its session exactly (requestSession)
	}
	if st, n := p.calls.only(srv); n == 1 {
		return st.parkedCall()
	}
	return nil
}

// ask puts one server request to the client of pc and waits for the answer
// (the client's next round), at most timeout.
func (p *Proxy) ask(ctx context.Context, pc *parkedCall, method string, req mcp.InputRequest, timeout time.Duration) (json.RawMessage, error) {
	pc.mu.Lock()
	pc.askSeq++
	key := "mcp-proxy/" + strings.ReplaceAll(method, "/", "-") + "-" + strconv.Itoa(pc.askSeq)
	pc.mu.Unlock()
	if !p.parked.reserve(pc) {
		return nil, refuse(codeRefused, "%s not relayed: agent '%s' has %d calls waiting for their clients' answers already",
			method, pc.agent, maxParkedPerAgent)
	}
	a := &inputAsk{key: key, method: method, req: req, answer: make(chan inputAnswer, 1)}
	defer a.abandoned.Store(true) // a no-op once it was asked: then awaitRound has it
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case pc.asks <- a:
	case <-pc.done:
		return nil, refuse(codeRefused, "%s not relayed: the call ended", method)
	case <-ctx.Done():
		return nil, refuse(codeRefused, "%s not relayed: the call ended", method)
	case <-t.C:
		return nil, refuse(codeRefused, "%s not relayed: another request of this call is still unanswered", method)
	}
	select {
	case ans := <-a.answer:
		return ans.result, ans.err
	case <-pc.done:
		return nil, refuse(codeRefused, "%s not answered: the call ended", method)
	case <-ctx.Done():
		return nil, refuse(codeRefused, "%s not answered: the call ended", method)
	case <-t.C:
		return nil, refuse(codeRefused, "the client did not answer the %s request within %s", method, timeout)
	}
}

// roundTripMethods are the requests besides tools/call whose upstream may
// ask a stateless client for input: their results can be input_required.
var roundTripMethods = map[string]bool{"resources/read": true, "prompts/get": true}

// surfaceRoundTrip runs a stateless client's resources/read or prompts/get
// (h) as a parked call, so that a server request it raises reaches the
// client through a round trip; a retry with a requestState resumes it.
func (p *Proxy) surfaceRoundTrip(ctx context.Context, st *sessionState, method string, params, meta json.RawMessage,
	h directHandler) (json.RawMessage, *wireError) {
	target := "uri"
	if method == "prompts/get" {
		target = "name"
	}
	what, _ := stringMember(params, target)
	key := method + " " + what
	state, _ := stringMember(params, "requestState")
	if isParkToken(state) {
		rt := &roundTrip{state: state}
		if raw, ok, _ := rawjson.Get(params, "inputResponses"); ok && json.Unmarshal(raw, &rt.responses) != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: "invalid params: inputResponses"}
		}
		return p.resumeParked(ctx, st, key, meta, rt)
	}
	var caps mcp.ClientCapabilities
	if raw, ok, _ := rawjson.Get(meta, mcp.MetaKeyClientCapabilities); ok {
		_ = json.Unmarshal(raw, &caps) // unreadable: no capabilities, so requests are refused clearly
	}
	// The handler registers the request as in flight to its server, so a
	// stdio upstream's request finds st, and through it the parked call.
	return p.startParkedJob(ctx, st, key, caps, p.serverTimeout(p.surfaceServer(st, method, what)), nil,
		func(cctx context.Context) (json.RawMessage, *wireError) { return h(p, cctx, st, params) })
}

// surfaceServer is the upstream a resources/read (by URI) or prompts/get
// (by name) goes to, or "" when it routes nowhere (the handler says why).
func (p *Proxy) surfaceServer(st *sessionState, method, what string) string {
	if method == "prompts/get" {
		if e := p.Catalog().surface.byPrompt[what]; e != nil {
			return e.Server
		}
		return ""
	}
	srv, _, _, _, werr := p.resourceRoute(st, what)
	if werr != nil {
		return ""
	}
	return srv
}
