package downstream

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Server requests to stateless clients (docs/protocol.md#requests-from-servers). A client of the stateless
// 2026-07-28 protocol over HTTP has no stream on which the proxy could send
// it a request. When an upstream asks for sampling, elicitation or roots
// during such a client's call, the call is parked: it goes on running
// upstream, detached from the client's HTTP request, while the proxy
// answers that request with an input_required result carrying the
// upstream's request and a request state naming the parked call. The client
// retries the call with its answer; the proxy hands the answer to the
// upstream and waits again, for the result or for the next request.
//
// The request state is sealed (roundstate.go): it names the parked call by
// an id known to this process, and the round, and a new state is issued
// every round; each is good for one retry, for the agent, client and tool
// it was issued for, until the call ends or has waited longer than the
// server's timeout for the client's answer. Then the call is cancelled
// upstream and no longer counts as in flight to its server (a server's
// request is not refused for being ambiguous because of a call whose
// client went away). A parked call stays in the process that parked it.
// With the memory store a retry must reach that process (elsewhere the call
// is unknown, and the client is told to call again); with a Redis store the
// state names the replica holding the call, and a retry reaching another
// one is forwarded there (crossreplica.go).
//
// Every request the upstream sends before the client could answer the
// round's first goes out in the same round: the proxy waits roundGather
// after the first for more.
//
// A parked call's progress goes to whichever request is waiting on it, with
// that request's progress token; while none is, the latest value is kept.

// roundGather is how long a round waits, after the first request of the
// upstream, for more before the client is asked: a server that sends
// several requests at once (each answered on its own) gets them all asked
// in one round, not one round each.
const roundGather = 50 * time.Millisecond

// roundGather is rl.gather, else the constant roundGather.
func (rl *relay) roundGather() time.Duration {
	if rl.gather > 0 {
		return rl.gather
	}
	return roundGather
}

// inputAsk is one upstream request waiting for the client's answer.
type inputAsk struct {
	key       string          // its id among the round's input requests
	method    string          //
	req       json.RawMessage // the input request: {"method":..., "params":...}
	answer    chan inputAnswer
	abandoned atomic.Bool // the asker gave up: the question is not put to the client
}

type inputAnswer struct {
	result json.RawMessage
	err    error
}

// parkedCall is a stateless client's request that may span rounds.
type parkedCall struct {
	id       string   // names it in its request states
	req      *request // the request that started it, in flight to its server while it runs
	agent    string
	key      string // what the client asked for: a tool's exposed name, or a method and its target
	caps     clientCaps
	timeout  time.Duration  // how long the call may wait for the client's answer
	progress *progressRoute // the call's progress, or nil

	asks   chan *inputAsk // server requests raised during the call
	done   chan struct{}  // closed when the call has its outcome
	result json.RawMessage
	werr   *wireError
	ctx    context.Context // the call's, ended by cancel
	cancel context.CancelFunc

	mu      sync.Mutex
	asked   []*inputAsk // the requests the client was last asked to answer
	round   int         // the rounds asked so far
	expire  *time.Timer // ends a call whose client does not come back
	askSeq  int
	counted bool // holds one of its agent's maxParkedPerAgent places
}

// maxParkedPerAgent bounds the calls of one agent's stateless clients that
// wait for an answer (they run on without any client connection): beyond
// it an upstream's request is refused and the call goes on without it.
const maxParkedPerAgent = 64

// parkGrace is how long the state of a call that ended while its client was
// away stays valid, so that the client's retry still gets the outcome.
const parkGrace = time.Minute

// parkTable holds the parked calls between rounds, by id, and counts each
// agent's calls that have parked and not ended.
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

// put keeps pc for the retry of its current round.
func (t *parkTable) put(pc *parkedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*parkedCall{}
	}
	t.m[pc.id] = pc
}

// take removes and returns the parked call of st when st is the state of
// its current round (the state of an earlier round is used up), issued for
// this agent and key.
func (t *parkTable) take(st roundState) *parkedCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc := t.m[st.Park]
	if pc == nil || pc.agent != st.Agent || pc.key != st.Key {
		return nil
	}
	pc.mu.Lock()
	round := pc.round
	pc.mu.Unlock()
	if round != st.Round {
		return nil
	}
	delete(t.m, st.Park)
	return pc
}

// drop removes the call of id, when it is waiting for the retry of round,
// and reports whether it was (a retry's take may have come first).
func (t *parkTable) drop(id string, round int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc, ok := t.m[id]
	if !ok {
		return false
	}
	pc.mu.Lock()
	same := pc.round == round
	pc.mu.Unlock()
	if same {
		delete(t.m, id)
	}
	return same
}

// parkable reports whether r is a stateless request over HTTP: it has no
// stream to take the proxy's requests on, so a call that needs the
// client's input is parked (stdio is bidirectional and needs no parking).
func parkable(r *request) bool { return r.modern && r.sess.transport == transportHTTP }

// startParked runs job for r detached from the client's HTTP request and
// waits for its first round. key names what the client asked for; a retry
// must name it again.
func (rl *relay) startParked(ctx context.Context, r *request, key string, timeout time.Duration, progress *progressRoute,
	job func(context.Context) (json.RawMessage, *wireError)) (json.RawMessage, *inputRequired, *wireError) {
	pc := &parkedCall{
		id:       randid.Hex(16),
		req:      r,
		agent:    r.sess.agent.Name,
		key:      key,
		caps:     r.caps,
		timeout:  timeout,
		progress: progress,
		asks:     make(chan *inputAsk, 1),
		done:     make(chan struct{}),
	}
	r.sess.state.Park(pc)
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pc.ctx, pc.cancel = cctx, cancel
	go func() {
		defer cancel()
		pc.result, pc.werr = job(cctx)
		close(pc.done)
		pc.mu.Lock()
		if pc.expire != nil {
			pc.expire.Stop() // the state lives on for parkGrace, not the result for the timeout
		}
		pc.mu.Unlock()
		rl.parked.release(pc)
	}()
	return rl.awaitRound(ctx, pc)
}

// awaitRound waits, for one client request, until the call ends or needs
// the client's answers to server requests (all those that come within
// roundGather of the first).
func (rl *relay) awaitRound(ctx context.Context, pc *parkedCall) (json.RawMessage, *inputRequired, *wireError) {
	for {
		select {
		case <-pc.done:
			pc.progress.detach() // nothing more reaches this request once it answers
			return pc.result, nil, pc.werr
		case ask := <-pc.asks:
			if ask.abandoned.Load() {
				continue // its upstream request gave up while it waited to be asked
			}
			asks := []*inputAsk{ask}
			gather := time.NewTimer(rl.roundGather())
		more:
			for {
				select {
				case a := <-pc.asks:
					if !a.abandoned.Load() {
						asks = append(asks, a)
					}
				case <-gather.C:
					break more
				case <-pc.done:
					// The call ended without the answers: its outcome is
					// this round's answer.
					gather.Stop()
					pc.progress.detach()
					return pc.result, nil, pc.werr
				}
			}
			gather.Stop()
			return nil, rl.park(pc, asks), nil
		case <-ctx.Done():
			// The client closed its request: the call is cancelled upstream.
			pc.cancel()
			select {
			case <-pc.done:
			case <-time.After(progressFlushLimit):
			}
			pc.progress.detach()
			return nil, nil, errorf(codeServerError, "request cancelled")
		}
	}
}

// park answers the waiting request with asks as the round's input requests
// and keeps the call for the client's retry, under a new sealed state.
func (rl *relay) park(pc *parkedCall, asks []*inputAsk) *inputRequired {
	pc.progress.detach()
	reqs := make(map[string]json.RawMessage, len(asks))
	for _, a := range asks {
		reqs[a.key] = a.req
	}
	pc.mu.Lock()
	pc.asked = asks
	pc.round++
	round := pc.round
	// The client has as long to answer as the call has to run; then the
	// call is cancelled upstream, stops counting as in flight to its
	// server, and its state is forgotten.
	pc.expire = time.AfterFunc(pc.timeout, func() {
		if rl.parked.drop(pc.id, round) { // not when a retry took it first
			pc.cancel()
		}
	})
	pc.mu.Unlock()
	rl.parked.put(pc)
	go func() { // forget the state once the call has ended anyway
		<-pc.done
		time.AfterFunc(parkGrace, func() { rl.parked.drop(pc.id, round) })
	}()
	st := roundState{Agent: pc.agent, Subject: pc.req.sess.principal.subject, Token: pc.req.sess.principal.token,
		Key: pc.key, Round: round, Park: pc.id, Holder: rl.cross.self()}
	return newInputRequired(reqs, rl.sealState(st, pc.timeout+parkGrace))
}

// resumeParked is a later round of a parked call, whose sealed state st
// names it: it hands the client's answers to the upstream and waits again.
// A call parked on another replica is resumed there (crossreplica.go).
func (rl *relay) resumeParked(ctx context.Context, r *request, st roundState) (json.RawMessage, *inputRequired, *wireError) {
	if st.Holder != "" && rl.cross != nil && st.Holder != rl.cross.self() {
		return rl.cross.resumeRemote(ctx, r, st)
	}
	return rl.resumeHere(ctx, r, st)
}

// resumeHere is resumeParked for a call parked in this process.
func (rl *relay) resumeHere(ctx context.Context, r *request, st roundState) (json.RawMessage, *inputRequired, *wireError) {
	pc := rl.parked.take(st)
	if pc == nil {
		return nil, nil, errorf(codeInvalidParams, "invalid requestState: the call it belongs to has ended, "+
			"waited too long for this answer, was answered already, or ran on another proxy instance; call the tool again")
	}
	pc.mu.Lock()
	asks := pc.asked
	pc.asked = nil
	if pc.expire != nil {
		pc.expire.Stop()
	}
	pc.mu.Unlock()
	pc.progress.attach(r.out, progressTokenOf(r.meta))
	resp, _, _ := rawjson.Get(r.params, "inputResponses")
	for _, ask := range asks {
		var ans inputAnswer
		if v, ok, _ := rawjson.Get(resp, ask.key); ok && !rawjson.IsNull(v) {
			ans.result = append(json.RawMessage(nil), v...)
		}
		if ans.result == nil {
			ans.err = refuse(codeRefused, "the client did not answer the %s request", ask.method)
		}
		ask.answer <- ans
	}
	return rl.awaitRound(ctx, pc)
}

// parkedAsker asks a parked call's stateless client through a round trip.
type parkedAsker struct {
	relay *relay
	pc    *parkedCall
}

func (a parkedAsker) caps() clientCaps { return a.pc.caps }

func (a parkedAsker) ask(ctx context.Context, method string, params json.RawMessage, within time.Duration) (json.RawMessage, error) {
	if within <= 0 {
		within = time.Minute
		if d, ok := ctx.Deadline(); ok {
			within = time.Until(d)
		}
	}
	return a.relay.ask(ctx, a.pc, method, params, within)
}

// ask puts one server request to the client of pc and waits for the answer
// (the client's next round), at most timeout.
func (rl *relay) ask(ctx context.Context, pc *parkedCall, method string, params json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	pc.mu.Lock()
	pc.askSeq++
	key := "mcp-proxy/" + strings.ReplaceAll(method, "/", "-") + "-" + strconv.Itoa(pc.askSeq)
	pc.mu.Unlock()
	if !rl.parked.reserve(pc) {
		return nil, refuse(codeRefused, "%s not relayed: agent '%s' has %d calls waiting for their clients' answers already",
			method, pc.agent, maxParkedPerAgent)
	}
	// The input request carries params always: a roots/list without them
	// fails to decode in the official Go SDK.
	req := json.RawMessage(`{"method":` + string(rawjson.String(method)) + `,"params":` + string(emptyIfNil(params)) + `}`)
	a := &inputAsk{key: key, method: method, req: req, answer: make(chan inputAnswer, 1)}
	defer a.abandoned.Store(true) // a no-op once it was asked: then awaitRound has it
	t := time.NewTimer(timeout)
	defer t.Stop()
	// One wait for both steps, the hand-over to the call's next round and
	// then the answer, under one timer: asks is nil once a is handed over,
	// answer nil until then, and step words the refusals of each.
	asks := pc.asks
	var answer chan inputAnswer
	step, cancelled := "not relayed", "the call was cancelled"
	for {
		select {
		case asks <- a:
			asks, answer = nil, a.answer
			step, cancelled = "not answered", "the call was cancelled (its client did not come back)"
		case ans := <-answer:
			return ans.result, ans.err
		case <-pc.done:
			return nil, refuse(codeRefused, "%s %s: the call ended", method, step)
		case <-pc.ctx.Done():
			return nil, refuse(codeRefused, "%s %s: %s", method, step, cancelled)
		case <-ctx.Done():
			return nil, refuse(codeRefused, "%s %s: the call ended", method, step)
		case <-t.C:
			if answer == nil {
				return nil, refuse(codeRefused, "%s not relayed: another request of this call is still unanswered", method)
			}
			return nil, refuse(codeRefused, "the client did not answer the %s request within %s", method, timeout)
		}
	}
}
