package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Input requests of 2026-07-28 upstreams, for 2026-07-28 clients
// (docs/protocol.md#requests-from-servers). Such an upstream answers a
// request it cannot finish without the client's input with an
// input_required result; when the client speaks 2026-07-28 too, the proxy
// passes that result on instead of asking the client itself: the input
// requests keep the upstream's keys (sampling's under the server's
// governance), and the upstream's requestState travels inside the proxy's
// sealed state (roundstate.go). The client's retry carries its
// inputResponses and that state; the proxy sends the upstream the
// responses with the upstream's own state. A request the client cannot
// answer because it did not declare the capability fails the call with
// -32021 (MCP 2026-07-28: MissingRequiredClientCapabilityError); roots/list
// for a client without roots is answered by the proxy (the server's
// configured roots), as it is for every era.

// maxInputRounds bounds the rounds the proxy answers itself in a row (an
// upstream that keeps asking only for what the proxy answers would never
// end), and the rounds of one request passed to the client.
const maxInputRounds = 10

// missingCapability refuses a server's request that needs a client
// capability the client of the call did not declare. To a session-era
// upstream it is the JSON-RPC error -32601 (Unwrap); a 2026-07-28 client's
// request fails with -32021 naming the capability; a 2025-era client's tool
// call gets an isError result naming it.
type missingCapability struct {
	sampling   bool
	elicitForm bool // form-mode elicitation
	elicitURL  bool // URL-mode elicitation
}

// name says what the client lacks, in words.
func (m *missingCapability) name() string {
	var parts []string
	if m.sampling {
		parts = append(parts, "sampling")
	}
	switch {
	case m.elicitForm && m.elicitURL:
		parts = append(parts, "elicitation (form and URL mode)")
	case m.elicitForm:
		parts = append(parts, "elicitation")
	case m.elicitURL:
		parts = append(parts, "URL-mode elicitation")
	}
	return strings.Join(parts, " and ")
}

// need is the capabilities object naming what the client lacks, as a
// -32021 error's requiredCapabilities lists it (an elicitation capability
// of {} means form mode, MCP 2026-07-28).
func (m *missingCapability) need() string {
	var parts []string
	switch {
	case m.elicitForm && m.elicitURL:
		parts = append(parts, `"elicitation":{"form":{},"url":{}}`)
	case m.elicitForm:
		parts = append(parts, `"elicitation":{}`)
	case m.elicitURL:
		parts = append(parts, `"elicitation":{"url":{}}`)
	}
	if m.sampling {
		parts = append(parts, `"sampling":{}`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// add makes m name what o names too.
func (m *missingCapability) add(o *missingCapability) {
	m.sampling = m.sampling || o.sampling
	m.elicitForm = m.elicitForm || o.elicitForm
	m.elicitURL = m.elicitURL || o.elicitURL
}

func (m *missingCapability) Error() string {
	return "the client of this call does not support " + m.name()
}

// Unwrap is the error a session-era upstream is answered with.
func (m *missingCapability) Unwrap() error {
	return &upstream.RPCError{Code: codeMethodNotFound, Message: m.Error()}
}

// wire is the -32021 error of a 2026-07-28 client's request.
func (m *missingCapability) wire() *wireError {
	return &wireError{Code: codeMissingCapability,
		Message: "Missing required client capability: the MCP server asked for " + m.name() + ", which the client did not declare",
		Data:    json.RawMessage(`{"requiredCapabilities":` + m.need() + `}`)}
}

// toolResult is the isError result of a 2025-era client's tool call.
func (m *missingCapability) toolResult(tool string) json.RawMessage {
	return textResult(fmt.Sprintf("tool '%s' was not completed: its MCP server asked for %s, "+
		"which this client did not declare in its capabilities", tool, m.name()), true)
}

// inputRound is an upstream's input_required result, read.
type inputRound struct {
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  json.RawMessage            `json:"requestState"`
}

// isInputRequired reports whether a result is a 2026-07-28 input_required
// result.
func isInputRequired(res json.RawMessage) bool {
	v, ok, _ := rawjson.Get(res, "resultType")
	return ok && string(v) == `"input_required"`
}

// sortedInputs is one upstream round's input requests, sorted out.
type sortedInputs struct {
	toClient map[string]json.RawMessage // the requests the client is to answer, by the upstream's keys
	own      map[string]json.RawMessage // the proxy's own answers, by key
	upState  json.RawMessage            // the upstream's requestState, nil when it sent none
}

// errBadInputs marks an input_required result the proxy cannot read.
var errBadInputs = errors.New("invalid input_required result")

// sortInputs decides who answers each input request of a 2026-07-28
// upstream's input_required result raw, for a client with caps: the client
// (sampling under the server's governance), or the proxy (roots/list when
// the client has no roots). A request the client cannot answer for want of
// a capability is a *missingCapability naming every such capability of the
// round; a sampling request the server's governance refuses is that
// refusal.
func (rl *relay) sortInputs(srv string, caps clientCaps, raw json.RawMessage) (sortedInputs, error) {
	var in inputRound
	if err := json.Unmarshal(raw, &in); err != nil {
		return sortedInputs{}, fmt.Errorf("%w: %w", errBadInputs, err)
	}
	out := sortedInputs{toClient: map[string]json.RawMessage{}, own: map[string]json.RawMessage{}}
	if len(in.RequestState) > 0 && !rawjson.IsNull(in.RequestState) {
		out.upState = in.RequestState
	}
	keys := make([]string, 0, len(in.InputRequests))
	for k := range in.InputRequests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var missing *missingCapability
	for _, k := range keys {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(in.InputRequests[k], &req); err != nil {
			return sortedInputs{}, fmt.Errorf("%w: input request %q: %w", errBadInputs, k, err)
		}
		params := req.Params
		if len(params) == 0 || params[0] != '{' {
			params = json.RawMessage(`{}`)
		}
		var err error
		switch req.Method {
		case "sampling/createMessage":
			params, _, err = rl.governSampling(srv, caps, params)
			if err == nil {
				rl.opts.Metrics.Sampling(srv, "ok") // passed to the client; its answer goes upstream unseen
			}
		case "elicitation/create":
			err = elicitationSupported(caps, params)
		case "roots/list":
			if !caps.roots {
				out.own[k] = rl.configuredRoots(srv)
				continue
			}
		default:
			return sortedInputs{}, fmt.Errorf("%w: input request %q is %q, which the proxy does not relay", errBadInputs, k, req.Method)
		}
		var mc *missingCapability
		switch {
		case errors.As(err, &mc):
			if missing == nil {
				missing = &missingCapability{}
			}
			missing.add(mc)
			continue
		case err != nil:
			return sortedInputs{}, err
		}
		out.toClient[k] = json.RawMessage(`{"method":` + string(rawjson.String(req.Method)) + `,"params":` + string(params) + `}`)
	}
	if missing != nil {
		return sortedInputs{}, missing
	}
	return out, nil
}

// roundParams are a call's params for the upstream's next round: the first
// round's params with inputResponses (the client's responses, with the
// proxy's own answers set) and the upstream's requestState.
func roundParams(params, responses, own, upState json.RawMessage) (json.RawMessage, error) {
	if len(responses) == 0 || rawjson.IsNull(responses) {
		responses = json.RawMessage(`{}`)
	}
	if len(own) > 0 && string(own) != "{}" {
		ms, err := rawjson.Members(own)
		if err != nil {
			return nil, err
		}
		kvs := make([]rawjson.KV, 0, len(ms))
		for _, m := range ms {
			kvs = append(kvs, rawjson.KV{Key: m.Key, Value: own[m.ValueStart:m.ValueEnd]})
		}
		if responses, err = rawjson.SetMany(responses, kvs...); err != nil {
			return nil, err
		}
	}
	if len(upState) == 0 {
		var err error
		if params, err = rawjson.Delete(params, "requestState"); err != nil {
			return nil, err
		}
		return rawjson.Set(params, "inputResponses", responses)
	}
	return rawjson.SetMany(params, rawjson.KV{Key: "inputResponses", Value: responses}, rawjson.KV{Key: "requestState", Value: upState})
}

type roundKey struct{}

// withRound returns ctx carrying the state of a later round of a
// resources/read or prompts/get (resources.go to forwardRounds).
func withRound(ctx context.Context, st *roundState) context.Context {
	return context.WithValue(ctx, roundKey{}, st)
}

// roundFrom is the round state ctx carries, nil on a first round.
func roundFrom(ctx context.Context) *roundState {
	st, _ := ctx.Value(roundKey{}).(*roundState)
	return st
}

// forwardRounds is forward for a resources/read or prompts/get: for a
// 2026-07-28 client, a 2026-07-28 upstream's input requests are passed on
// as for a tool call (the request's arguments bound to the state), and a
// later round sends the client's answers with the upstream's state.
func (rp *resourcesPrompts) forwardRounds(ctx context.Context, r *request, srv string, up Upstream, method string, params json.RawMessage) (json.RawMessage, *wireError) {
	if !r.modern {
		return rp.forward(ctx, r, srv, up, method, params)
	}
	args, _, _ := rawjson.Get(r.params, "arguments")
	round := 1
	if st := roundFrom(ctx); st != nil {
		if st.Server != srv || st.Args != argsDigest(args) {
			return nil, invalidState("it belongs to another request")
		}
		responses, _, _ := rawjson.Get(r.params, "inputResponses")
		p, err := roundParams(params, responses, st.Own, st.Up)
		if err != nil {
			return nil, errorf(codeInvalidParams, "invalid params: %s", err.Error())
		}
		params, round = p, st.Round+1
	}
	ctx = upstream.WithInputRequiredPassthrough(ctx)
	for own := 0; ; own++ {
		res, werr := rp.forward(ctx, r, srv, up, method, params)
		if werr != nil || !isInputRequired(res) {
			return res, werr
		}
		if round+own > maxInputRounds {
			return nil, errorf(codeInternal, "MCP server '%s' still asked for input after %d rounds", srv, maxInputRounds)
		}
		sorted, err := rp.relay.sortInputs(srv, r.caps, res)
		var mc *missingCapability
		switch {
		case errors.As(err, &mc):
			return nil, mc.wire()
		case errors.Is(err, errBadInputs):
			return nil, errorf(codeInternal, "MCP server '%s': %s", srv, rp.errText(err.Error()))
		case err != nil:
			return nil, errorf(codeRefused, "MCP server '%s' asked for input the proxy refused: %s", srv, rp.errText(err.Error()))
		}
		ownAnswers, _ := json.Marshal(sorted.own) // raw values: never fails
		if len(sorted.toClient) == 0 && len(sorted.own) > 0 {
			if params, err = roundParams(params, nil, ownAnswers, sorted.upState); err != nil {
				return nil, errorf(codeInternal, "MCP server '%s': %s", srv, rp.errText(err.Error()))
			}
			continue // the proxy answered every request of the round itself
		}
		st := newRoundState(r, surfaceKey(r))
		st.Args, st.Server, st.Round, st.Up = argsDigest(args), srv, round, sorted.upState
		if len(sorted.own) > 0 {
			st.Own = ownAnswers
		}
		return newInputRequired(sorted.toClient, rp.sealState(st, rp.serverTimeout(srv))).result, nil
	}
}
