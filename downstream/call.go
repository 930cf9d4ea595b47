package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// JSON-RPC error codes the proxy answers with.
const (
	codeInvalidParams = -32602
	codeInternal      = -32603
	// codeServerError is the implementation-defined range's first code, used
	// for routing failures: the upstream is not connected or went away.
	codeServerError = -32000
	// codeTimeout is the code MCP SDKs use for a request that timed out.
	codeTimeout = -32001
)

// wireError is a JSON-RPC error the proxy sends downstream as it is.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	// input, when set, is not an error: the call needs the client's input
	// first (a 2026-07-28 multi round-trip); mcp-go writes it as the result.
	input *mcp.CallToolResult
}

// maxErrorData bounds the upstream error data passed downstream.
const maxErrorData = 64 << 10

// errorData is an upstream error's data as it may go downstream: sanitized
// like every error text (SPEC §9.4); dropped when too large or when
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

func (e *wireError) Error() string { return e.Message }

// callTool is the mcp-go handler of every shadow tool. When the request came
// through the wire layer it carries a slot: the raw outcome goes there and
// the wire layer writes it; otherwise the outcome is converted to mcp-go's
// types.
func (p *Proxy) callTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	sl := p.slots.fromMeta(req.Params.Meta)
	meta := json.RawMessage(nil)
	var st *sessionState
	if sl != nil {
		meta, st = sl.meta, sl.state
		if sl.direct != nil {
			ctx = context.WithValue(ctx, directKey{}, sl.direct)
		}
	} else {
		if req.Params.Meta != nil {
			meta, _ = json.Marshal(req.Params.Meta)
		}
		var err error
		if st, err = p.stateFor(ctx, "", req.Header); err != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: err.Error()}
		}
	}
	if server.IsModernRequest(ctx) {
		ctx = context.WithValue(ctx, roundTripKey{}, &roundTrip{responses: req.Params.InputResponses, state: req.Params.RequestState})
	}
	result, werr := p.forwardCall(ctx, st, req.Params.Name, req.Params.RawArguments, meta, linkSupported(ctx))
	if werr != nil && werr.input != nil {
		if raw, err := inputResult(werr.input); sl != nil && err == nil {
			sl.set(raw, nil)
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		}
		return werr.input, nil // the slot stays empty: mcp-go's answer goes out as it is
	}
	if sl != nil {
		sl.set(result, werr)
		if werr != nil {
			return nil, werr
		}
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	}
	if werr != nil {
		return nil, werr
	}
	return typedResult(result)
}

// inputResult encodes an input_required result. mcp-go leaves out the
// params of a roots/list input request, which the schema makes optional but
// the official Go SDK fails to decode; "params": {} suits both.
func inputResult(r *mcp.CallToolResult) (json.RawMessage, error) {
	reqs := make(map[string]json.RawMessage, len(r.InputRequests))
	for k, ir := range r.InputRequests {
		b, err := json.Marshal(ir)
		if err != nil {
			return nil, err
		}
		if _, has, _ := rawjson.Get(b, "params"); !has {
			if b, err = rawjson.Set(b, "params", []byte(`{}`)); err != nil {
				return nil, err
			}
		}
		reqs[k] = b
	}
	out := map[string]any{"resultType": r.ResultType, "inputRequests": reqs}
	if r.RequestState != "" {
		out["requestState"] = r.RequestState
	}
	return json.Marshal(out)
}

// forwardCall routes one tools/call to its upstream and returns the raw
// result or the error to send downstream.
func (p *Proxy) forwardCall(ctx context.Context, st *sessionState, name string, args, meta json.RawMessage, linkOK bool) (json.RawMessage, *wireError) {
	if res, werr, own := p.ownCall(ctx, st, name, args, meta, linkOK); own {
		return res, werr
	}
	if rt, _ := ctx.Value(roundTripKey{}).(*roundTrip); rt != nil && isParkToken(rt.state) {
		return p.resumeParked(ctx, st, name, meta, rt) // a later round of a parked call (mrtr.go)
	}
	entry, ok := p.Catalog().Lookup(name)
	if !ok {
		return nil, unknownTool(name)
	}
	agent := st.agent.Name
	if rule := st.agent.Decide(entry.policyTool(), st.perCall); rule != filter.RuleNone {
		p.opts.Metrics.PolicyDenial(agent, string(rule))
		p.opts.Metrics.ToolCall(entry.Server, entry.Name, metrics.OutcomeDenied, 0)
		callEvent(p.log.Debug(), agent, entry).Str("rule", string(rule)).Msg("tool call denied")
		if rule.Hidden() {
			return nil, unknownTool(name)
		}
		return denied(name, rule), nil
	}
	g := p.gen()
	up, scfg := g.ups[entry.Server], g.cfg.Servers[entry.Server]
	if up == nil || scfg == nil || !up.Snapshot().Available() {
		p.opts.Metrics.ToolCall(entry.Server, entry.Name, metrics.OutcomeError, 0)
		return nil, p.serverDown(entry.Server, up)
	}
	refusal, ask := p.approve(ctx, st, entry, args)
	if ask != nil {
		return nil, &wireError{input: ask}
	}
	if refusal != nil {
		p.opts.Metrics.ToolCall(entry.Server, entry.Name, metrics.OutcomeDenied, 0)
		return refusal, nil
	}
	args = withoutApproved(args)
	meta, progress := p.progress.open(ctx, entry.Server, meta)
	params, err := callParams(entry.Name, args, meta)
	if err != nil {
		progress.close()
		return nil, &wireError{Code: codeInvalidParams, Message: "invalid tools/call params: " + sanitize.Error(err.Error())}
	}
	c := &upstreamCall{st: st, entry: entry, up: up, timeout: scfg.Timeout.D(), params: params, progress: progress, linkOK: linkOK}
	if parkable(ctx, st) {
		return p.startParked(ctx, c)
	}
	return p.runCall(ctx, c)
}

// callEvent adds a call's agent, server and tool to a log event; a disabled
// level's nil event costs nothing (a logger With per call allocated even
// when nothing was logged).
func callEvent(e *zerolog.Event, agent string, entry *ToolEntry) *zerolog.Event {
	return e.Str("agent", agent).Str("server", entry.Server).Str("tool", entry.Name)
}

// upstreamCall is one tools/call on its way to an upstream, past the policy
// and approval gates.
type upstreamCall struct {
	st       *sessionState
	entry    *ToolEntry
	up       Upstream
	timeout  time.Duration
	params   json.RawMessage
	progress *progressRoute // closed by runCall
	linkOK   bool
}

// runCall sends the call upstream and waits for its outcome.
func (p *Proxy) runCall(ctx context.Context, c *upstreamCall) (json.RawMessage, *wireError) {
	entry, up, timeout, agent := c.entry, c.up, c.timeout, c.st.agent.Name
	end := p.calls.begin(entry.Server, c.st)
	defer end()
	defer c.progress.close()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	start := time.Now()
	result, err := up.Request(cctx, "tools/call", c.params)
	elapsed := time.Since(start)
	outcome, werr := p.classify(entry, result, err, ctx, cctx, timeout)
	p.opts.Metrics.ToolCall(entry.Server, entry.Name, outcome, elapsed)
	if werr != nil {
		callEvent(p.log.Warn(), agent, entry).Str("outcome", outcome).Dur("duration", elapsed).Str("error", werr.Message).Msg("tool call failed")
		return nil, werr
	}
	callEvent(p.log.Debug(), agent, entry).Str("outcome", outcome).Dur("duration", elapsed).Int("bytes", len(result)).Msg("tool call")
	return p.rewriteResult(agent, entry.Server, result, c.linkOK), nil
}

// classify maps a call's error to its metric outcome and downstream error.
func (p *Proxy) classify(entry *ToolEntry, result json.RawMessage, err error, ctx, cctx context.Context, timeout time.Duration) (string, *wireError) {
	var rpcErr *upstream.RPCError
	switch {
	case err == nil:
		if isErrorResult(result) {
			return metrics.OutcomeToolError, nil
		}
		return metrics.OutcomeOK, nil
	case ctx.Err() != nil:
		return metrics.OutcomeCanceled, &wireError{Code: codeServerError, Message: "request cancelled"}
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return metrics.OutcomeTimeout, &wireError{Code: codeTimeout,
			Message: fmt.Sprintf("MCP tool call '%s' timed out after %s", entry.Exposed, timeout)}
	case errors.As(err, &rpcErr):
		return metrics.OutcomeError, &wireError{Code: rpcErr.Code, Message: p.errText(rpcErr.Message), Data: p.errorData(rpcErr.Data)}
	case errors.Is(err, upstream.ErrNotConnected):
		return metrics.OutcomeError, p.notSent(entry.Server, err)
	case errors.Is(err, upstream.ErrConnectionLost):
		// The call may or may not have run: it is never replayed (SPEC §3).
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

// linkSupported reports whether the client's protocol version has the
// resource_link content type (2025-06-18 and later).
func linkSupported(ctx context.Context) bool {
	v := server.RequestProtocolVersion(ctx)
	return v == "" || v >= mcp.ProtocolVersion20250618
}

func unknownTool(name string) *wireError {
	return &wireError{Code: codeInvalidParams, Message: "unknown tool: " + sanitize.Error(name)}
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

// callParams builds the upstream tools/call params: the upstream's own tool
// name, the client's argument bytes as they came, and the client's _meta.
func callParams(name string, args, meta json.RawMessage) (json.RawMessage, error) {
	params := []byte(`{}`)
	var err error
	params, err = rawjson.Set(params, "name", rawjson.String(name))
	if err != nil {
		return nil, err
	}
	if len(args) > 0 && string(args) != "null" {
		if params, err = rawjson.Set(params, "arguments", args); err != nil {
			return nil, err
		}
	}
	meta, err = hopMeta(meta)
	if err != nil {
		return nil, err
	}
	if len(meta) > 0 && string(meta) != "null" && string(meta) != "{}" {
		if params, err = rawjson.Set(params, "_meta", meta); err != nil {
			return nil, err
		}
	}
	return params, nil
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
	ms, err := rawjson.Members(meta)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if strings.HasPrefix(m.Key, protocolMetaPrefix) {
			if meta, err = rawjson.Delete(meta, m.Key); err != nil {
				return nil, err
			}
		}
	}
	return meta, nil
}

// isErrorResult reports whether a raw tools/call result has isError: true.
func isErrorResult(result json.RawMessage) bool {
	v, ok, err := rawjson.Get(result, "isError")
	return err == nil && ok && string(v) == "true"
}

// rewriteResult applies the result rewrites of SPEC §8 and §9.4: blobs to
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
// verb). It follows the same path as a tools/call from a client.
func (p *Proxy) CallTool(ctx context.Context, agent string, perCall []string, name string, args json.RawMessage) (json.RawMessage, error) {
	st, err := p.newState(agent, perCall)
	if err != nil {
		return nil, err
	}
	result, werr := p.forwardCall(ctx, st, name, args, nil, true)
	if werr != nil {
		return nil, werr
	}
	return result, nil
}

// IsErrorResult reports whether a raw tools/call result has isError: true.
func IsErrorResult(result json.RawMessage) bool { return isErrorResult(result) }
