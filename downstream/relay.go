package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Requests from upstream servers to the client (SPEC §10).
//
// A request reaches the downstream session whose call to that server is in
// flight. Over Streamable HTTP upstreams mcp-go derives the request's
// context from the call that is being answered, so the session is read from
// it exactly. Otherwise (stdio, or a request on the GET stream) the proxy
// looks at which sessions have a call in flight to that server: exactly one
// gets the request; none or several is a clear error to the upstream, since
// guessing could show one user another user's prompt.

// callRegistry counts, per server, the tool calls each session has in flight.
type callRegistry struct {
	mu sync.Mutex
	m  map[string]map[*sessionState]int
}

func (r *callRegistry) begin(server string, st *sessionState) (end func()) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]map[*sessionState]int{}
	}
	if r.m[server] == nil {
		r.m[server] = map[*sessionState]int{}
	}
	r.m[server][st]++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.m[server][st]--; r.m[server][st] <= 0 {
			delete(r.m[server], st)
		}
	}
}

// only returns the one session with calls in flight to server, and how
// many sessions have some.
func (r *callRegistry) only(server string) (*sessionState, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for st := range r.m[server] {
		if len(r.m[server]) == 1 {
			return st, 1
		}
	}
	return nil, len(r.m[server])
}

// Error codes of refused upstream requests.
const (
	codeMethodNotFound = -32601
	codeRefused        = -32000
)

func refuse(code int, format string, a ...any) error {
	return &upstream.RPCError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// OnUpstreamRequest answers an upstream's sampling/createMessage,
// elicitation/create or roots/list by asking the downstream client of the
// call it belongs to. It is upstream.Options.OnRequest.
func (p *Proxy) OnUpstreamRequest(ctx context.Context, srv, method string, params json.RawMessage) (json.RawMessage, error) {
	if pc := p.parkedFor(ctx, srv); pc != nil {
		return p.relayParked(ctx, pc, srv, method, params)
	}
	sess, err := p.requestSession(ctx, srv, method)
	if err != nil {
		if method == string(mcp.MethodSamplingCreateMessage) {
			p.opts.Metrics.Sampling(srv, "unroutable")
		}
		return nil, err
	}
	if server.IsModernRequest(ctx) && transportOf(sess) == "http" {
		// A stateless 2026-07-28 request over HTTP that is not parked (a
		// completion, a subscription) has no stream to take a server
		// request on, nor a result that could carry it. Refuse at once.
		if method == string(mcp.MethodSamplingCreateMessage) {
			p.opts.Metrics.Sampling(srv, "unsupported")
		}
		return nil, refuse(codeMethodNotFound, "%s from MCP server '%s' refused: the client uses the stateless 2026-07-28 protocol "+
			"over HTTP and this request's result cannot carry an input request", method, srv)
	}
	caps := mcp.ClientCapabilities{}
	if withInfo, ok := sess.(server.SessionWithClientInfo); ok {
		caps = withInfo.GetClientCapabilities()
	}
	sctx := p.mcp.WithContext(ctx, sess)
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		return p.relaySampling(sctx, srv, caps, params, func(ctx context.Context, cp mcp.CreateMessageParams) (json.RawMessage, error) {
			res, err := p.mcp.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: cp})
			return marshalRelay(res, err, "sampling")
		})
	case string(mcp.MethodElicitationCreate):
		if caps.Elicitation == nil {
			return nil, refuse(codeMethodNotFound, "the client of this call does not support elicitation")
		}
		var ep mcp.ElicitationParams
		if err := json.Unmarshal(params, &ep); err != nil {
			return nil, refuse(mcp.INVALID_PARAMS, "invalid elicitation/create params")
		}
		ectx, cancel := context.WithTimeout(sctx, p.serverTimeout(srv)) // a person answers: the call's own bound
		defer cancel()
		res, err := p.mcp.RequestElicitation(ectx, mcp.ElicitationRequest{Params: ep})
		return marshalRelay(res, err, "elicitation")
	default: // roots/list
		if caps.Roots == nil {
			return nil, refuse(codeMethodNotFound, "the client of this call does not support roots")
		}
		res, err := p.mcp.RequestRoots(sctx, mcp.ListRootsRequest{})
		return marshalRelay(res, err, "roots/list")
	}
}

// requestSession finds the downstream session an upstream request belongs to.
func (p *Proxy) requestSession(ctx context.Context, srv, method string) (server.ClientSession, error) {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s, nil
	}
	st, n := p.calls.only(srv)
	switch {
	case n == 0:
		return nil, refuse(codeRefused, "%s from MCP server '%s' refused: no client call to this server is in flight", method, srv)
	case n > 1:
		return nil, refuse(codeRefused, "%s from MCP server '%s' refused: %d client sessions have calls in flight to this server, "+
			"and the request does not say which one it belongs to", method, srv, n)
	}
	if sess := st.session(); sess != nil {
		return sess, nil
	}
	// Only a stateless 2026-07-28 request's state has no session.
	return nil, refuse(codeMethodNotFound, "%s from MCP server '%s' refused: the client uses the stateless 2026-07-28 protocol "+
		"over HTTP, to which the proxy cannot relay server requests yet", method, srv)
}

// relayParked asks a parked call's stateless client through a round trip.
func (p *Proxy) relayParked(ctx context.Context, pc *parkedCall, srv, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		return p.relaySampling(ctx, srv, pc.caps, params, func(ctx context.Context, cp mcp.CreateMessageParams) (json.RawMessage, error) {
			timeout := time.Minute // relaySampling bounds ctx by the server's sampling timeout
			if d, ok := ctx.Deadline(); ok {
				timeout = time.Until(d)
			}
			return p.ask(ctx, pc, method, mcp.NewSamplingInputRequest(cp), timeout)
		})
	case string(mcp.MethodElicitationCreate):
		if pc.caps.Elicitation == nil {
			return nil, refuse(codeMethodNotFound, "the client of this call does not support elicitation")
		}
		var ep mcp.ElicitationParams
		if err := json.Unmarshal(params, &ep); err != nil {
			return nil, refuse(mcp.INVALID_PARAMS, "invalid elicitation/create params")
		}
		return p.ask(ctx, pc, method, mcp.NewElicitationInputRequest(ep), p.serverTimeout(srv))
	default: // roots/list
		if pc.caps.Roots == nil {
			return nil, refuse(codeMethodNotFound, "the client of this call does not support roots")
		}
		return p.ask(ctx, pc, method, mcp.NewRootsInputRequest(), p.serverTimeout(srv))
	}
}

// relaySampling applies the server's sampling governance (SPEC §10), then
// asks the client through send.
func (p *Proxy) relaySampling(ctx context.Context, srv string, caps mcp.ClientCapabilities, params json.RawMessage,
	send func(context.Context, mcp.CreateMessageParams) (json.RawMessage, error)) (json.RawMessage, error) {
	cfg := p.gen().cfg.Servers[srv]
	if cfg == nil {
		return nil, refuse(codeRefused, "sampling refused: MCP server '%s' is no longer configured", srv)
	}
	sc := cfg.Sampling
	outcome := func(o string) { p.opts.Metrics.Sampling(srv, o) }
	if !sc.IsEnabled() {
		outcome("refused_disabled")
		return nil, refuse(codeRefused, "sampling is disabled for MCP server '%s' (servers.%s.sampling.enabled)", srv, srv)
	}
	if caps.Sampling == nil {
		outcome("unsupported")
		return nil, refuse(codeMethodNotFound, "the client of this call does not support sampling")
	}
	var cp mcp.CreateMessageParams
	if err := json.Unmarshal(params, &cp); err != nil {
		outcome("invalid")
		return nil, refuse(mcp.INVALID_PARAMS, "invalid sampling/createMessage params")
	}
	if len(sc.AllowedModels) > 0 && cp.ModelPreferences != nil && len(cp.ModelPreferences.Hints) > 0 && !anyHintAllowed(cp.ModelPreferences.Hints, sc.AllowedModels) {
		outcome("refused_model")
		return nil, refuse(codeRefused, "sampling refused: none of the requested models is in servers.%s.sampling.allowed_models", srv)
	}
	if !p.samplingRate.allow(srv, sc.MaxRPM, time.Now()) {
		outcome("refused_rate")
		return nil, refuse(codeRefused, "sampling refused: MCP server '%s' made more than %d requests in the last minute (servers.%s.sampling.max_rpm)", srv, sc.MaxRPM, srv)
	}
	if cp.MaxTokens <= 0 || cp.MaxTokens > sc.MaxTokensCap {
		cp.MaxTokens = sc.MaxTokensCap // the cap bounds what one request may cost
	}
	tctx, cancel := context.WithTimeout(ctx, sc.Timeout.D())
	defer cancel()
	res, err := send(tctx, cp)
	switch {
	case err != nil && tctx.Err() != nil && ctx.Err() == nil:
		outcome("timeout")
		return nil, refuse(codeRefused, "sampling request timed out after %s", sc.Timeout.D())
	case err != nil:
		outcome("error")
	default:
		outcome("ok")
	}
	return res, err
}

func anyHintAllowed(hints []mcp.ModelHint, allowed []string) bool {
	for _, h := range hints {
		for _, a := range allowed {
			if h.Name == a {
				return true
			}
		}
	}
	return false
}

func marshalRelay(res any, err error, what string) (json.RawMessage, error) {
	if err != nil {
		return nil, refuse(codeRefused, "the client did not answer the %s request: %s", what, sanitize.Error(err.Error()))
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, refuse(mcp.INTERNAL_ERROR, "cannot encode the client's %s answer", what)
	}
	return b, nil
}

// rateWindow is a per-server sliding one-minute window of sampling requests.
type rateWindow struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

func (w *rateWindow) allow(srv string, perMinute int, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.times == nil {
		w.times = map[string][]time.Time{}
	}
	recent := w.times[srv][:0]
	for _, t := range w.times[srv] {
		if now.Sub(t) < time.Minute {
			recent = append(recent, t)
		}
	}
	if len(recent) >= perMinute {
		w.times[srv] = recent
		return false
	}
	w.times[srv] = append(recent, now)
	return true
}

// OnUpstreamNotification relays an upstream's notifications: progress to
// the call it belongs to, log messages to the sessions granted the server
// (with the server's name as logger). It is upstream.Options.OnNotification.
func (p *Proxy) OnUpstreamNotification(srv, method string, params json.RawMessage) {
	switch method {
	case string(mcp.MethodNotificationProgress):
		p.progress.deliver(srv, params)
	case "notifications/message":
		p.forwardLog(srv, params)
	case "notifications/resources/updated":
		p.resourceUpdated(srv, params)
	}
}

// errBlocked is mcp-go's "session queue full" error.
var errBlocked = server.ErrNotificationChannelBlocked

// forwardLog sends an upstream log message to every session whose agent
// is granted the server, at that session's log level.
func (p *Proxy) forwardLog(srv string, params json.RawMessage) {
	var m struct {
		Level mcp.LoggingLevel `json:"level"`
		Data  any              `json:"data"`
	}
	if json.Unmarshal(params, &m) != nil || m.Level == "" {
		return
	}
	n := mcp.NewLoggingMessageNotification(m.Level, srv, m.Data)
	p.states.Range(func(_, v any) bool {
		st := v.(*sessionState)
		if sess := st.session(); sess != nil && st.agent.Granted(srv) {
			_ = p.mcp.SendLogMessageToClient(p.mcp.WithContext(context.Background(), sess), n)
		}
		return true
	})
}

// fanOutLogLevel passes a client's logging/setLevel to every connected
// upstream that logs (SPEC §10; the last level set wins upstream, and each
// session's own level still filters what it receives).
func (p *Proxy) fanOutLogLevel(level mcp.LoggingLevel) {
	params, _ := json.Marshal(map[string]any{"level": level})
	g := p.gen()
	for name, u := range g.ups {
		s := u.Snapshot()
		if s.State != upstream.StateConnected || !s.Capabilities.Logging {
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := u.Request(ctx, "logging/setLevel", params); err != nil {
				p.log.Debug().Str("server", name).Str("error", sanitize.Error(err.Error())).Msg("logging/setLevel not passed on")
			}
		}()
	}
}
