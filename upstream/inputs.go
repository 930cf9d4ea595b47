package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// In the 2026-07-28 era a server does not send requests to its client: a
// request it cannot finish without the client's input is answered with an
// input_required result naming them (elicitation/create,
// sampling/createMessage, roots/list), and the client sends the request
// again with the answers and the server's requestState (MCP 2026-07-28,
// basic/utilities: multi round-trip requests). The proxy asks its own
// clients through Options.OnRequest, exactly as it does for a session-era
// server's requests, so every client era is served as a session-era server
// would serve it.

// maxInputRounds bounds the rounds of one request: a server that keeps
// asking for input is cut off, as a loop would never end.
const maxInputRounds = 10

type passInputsKey struct{}

// WithInputRequiredPassthrough returns ctx asking Request to return a
// 2026-07-28 server's input_required results as they are (to a caller that
// hands them to a client of that era), instead of answering their input
// requests through Options.OnRequest.
func WithInputRequiredPassthrough(ctx context.Context) context.Context {
	return context.WithValue(ctx, passInputsKey{}, true)
}

// inputRound is what an input_required result asks.
type inputRound struct {
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  json.RawMessage            `json:"requestState"`
}

// fulfil answers raw, the result of request method with params, while it is
// input_required: every input request is asked of the proxy's clients
// (OnRequest), and the request is sent again with inputResponses and the
// server's requestState. It returns the first result that is not
// input_required. An input request the proxy cannot answer fails the
// request with that error.
func (s *session) fulfil(ctx context.Context, method string, params, raw json.RawMessage) (json.RawMessage, error) {
	for round := 0; ; round++ {
		// A look at one member first: results are passed on undecoded.
		if v, ok, _ := rawjson.Get(raw, "resultType"); !ok || string(v) != `"`+string(mcp.ResultTypeInputRequired)+`"` {
			return raw, nil
		}
		if s.c.opts.OnRequest == nil || ctx.Value(passInputsKey{}) != nil {
			return raw, nil
		}
		var in inputRound
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, s.c.opError(method, fmt.Errorf("%w: input_required result: %w", ErrBadResponse, err))
		}
		if round == maxInputRounds {
			return nil, s.c.opError(method, fmt.Errorf("%w: still input_required after %d rounds", ErrBadResponse, maxInputRounds))
		}
		responses, err := s.askInputs(ctx, in.InputRequests)
		if err != nil {
			return nil, s.c.opError(method, err)
		}
		fields := map[string]json.RawMessage{}
		if len(params) > 0 {
			if err := json.Unmarshal(params, &fields); err != nil {
				return nil, s.c.opError(method, fmt.Errorf("%w: params must be a JSON object", ErrBadRequest))
			}
		}
		fields["inputResponses"] = responses
		if len(in.RequestState) > 0 {
			fields["requestState"] = in.RequestState
		} else {
			delete(fields, "requestState")
		}
		next, err := json.Marshal(fields)
		if err != nil {
			return nil, err
		}
		raw, err = s.send(ctx, method, "px-"+strconv.FormatUint(s.c.ids.Add(1), 10), next)
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 || raw[0] != '{' {
			return nil, newInvalidResultError(s.c.name, method, raw)
		}
	}
}

// askInputs asks every input request of one round, in key order, and
// returns the inputResponses object.
func (s *session) askInputs(ctx context.Context, requests map[string]json.RawMessage) (json.RawMessage, error) {
	keys := make([]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(requests[k], &req); err != nil {
			return nil, fmt.Errorf("%w: input request %q: %w", ErrBadResponse, k, err)
		}
		switch mcp.MCPMethod(req.Method) {
		case mcp.MethodElicitationCreate, mcp.MethodSamplingCreateMessage, mcp.MethodListRoots:
		default:
			return nil, fmt.Errorf("%w: input request %q is %q, which the proxy does not answer", ErrBadResponse, k, req.Method)
		}
		params := req.Params
		if len(params) == 0 || params[0] != '{' {
			params = json.RawMessage(`{}`)
		}
		res, err := s.c.opts.OnRequest(ctx, s.c.name, req.Method, oneLine(params))
		if err != nil {
			return nil, fmt.Errorf("input request %q (%s): %w", k, req.Method, err)
		}
		out[k] = res
	}
	return json.Marshal(out)
}
