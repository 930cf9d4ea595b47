package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// Requests from upstream servers to the client (docs/protocol.md#requests-from-servers).
//
// A request reaches the client whose request to that server is in flight
// (a tools/call, a resources/read or a prompts/get). Over Streamable HTTP
// upstreams the request comes in on the stream of the call it belongs to,
// and its context is that call's, so the client is known exactly.
// Otherwise (stdio and SSE upstreams) the proxy looks at which sessions
// have a request in flight to that server that is free to ask: one that
// has waited longer than roundGather for the answer to a question of its
// own is not asking another (a server's handler awaits each answer before
// its next question, or asks several at once), so those are set aside
// while any other is in flight. Exactly one session left gets it; none or
// several is a clear error to the upstream, since guessing could show one
// user another user's prompt. roots/list is answered without a client
// when none can be asked (docs/protocol.md#requests-from-servers): the server's configured roots, else
// an empty list. The request passes as bytes: only the fields the proxy
// governs (sampling's maxTokens and includeContext) are rewritten.

// relay carries upstream servers' requests and notifications to the right
// client: it knows the client requests in flight to each server, the
// progress tokens of calls, the calls of stateless clients parked between
// round trips (roundtrip.go), and the log level each upstream is told
// (loglevel.go).
type relay struct {
	*env
	sessions *sessionTable
	// watchers take the resource updates (the resources part's subscriptions).
	watchers resourceWatchers

	calls    callRegistry  // requests in flight, per server
	progress progressRelay // progress tokens of calls in flight
	sampling rateWindow    // sampling requests per server, last minute
	parked   parkTable     // calls of stateless clients between round trips (roundtrip.go)
	levels   levelSync     // the log level passed to each upstream (loglevel.go)
	tasks    *taskTable    // the tasks clients created (tasks.go)
	// gather overrides roundGather (roundtrip.go) when positive: tests on a
	// loaded machine give a round longer to gather.
	gather time.Duration
}

// begin registers r as in flight to server until end is called or ctx (the
// call's) ends: a server's request without a context of its call finds
// r's client (callRegistry.only).
func (rl *relay) begin(ctx context.Context, server string, r *request) (end func()) {
	return rl.calls.begin(ctx, server, r)
}

// openProgress rewrites meta's progress token for the upstream and routes
// the server's progress to r's stream (progress.go).
func (rl *relay) openProgress(r *request, server string, meta json.RawMessage) (json.RawMessage, *progressRoute) {
	return rl.progress.open(r, server, meta)
}

// resourceWatchers is what the relay needs of the resource subscriptions.
type resourceWatchers interface {
	resourceUpdated(srv string, params json.RawMessage)
}

func newRelay(e *env, sessions *sessionTable, watchers resourceWatchers) *relay {
	return &relay{env: e, sessions: sessions, watchers: watchers}
}

// callRegistry holds, per server, the client requests in flight to it.
// A request whose call has ended on the proxy's side (cancelled, timed out,
// or abandoned by a stateless client whose state expired) no longer counts,
// even while its upstream request winds down: nothing the server asks for
// it can reach a client any more, and it must not make another client's
// call ambiguous.
type callRegistry struct {
	mu sync.Mutex
	m  map[string]map[*flight]bool
}

// flight is one registration of a request in flight to a server.
type flight struct {
	r   *request
	ctx context.Context // the call's: once it ends, the flight no longer counts
}

// begin registers r as in flight to server until end is called or ctx
// ends.
func (c *callRegistry) begin(ctx context.Context, server string, r *request) (end func()) {
	f := &flight{r: r, ctx: ctx}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]map[*flight]bool{}
	}
	if c.m[server] == nil {
		c.m[server] = map[*flight]bool{}
	}
	c.m[server][f] = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.m[server], f)
	}
}

// only returns the request a server's request without a call of its own
// belongs to, and how many sessions it could belong to (1 when found). A
// request waiting for the answer to a server request of its own
// (request.asking) is left out, unless its wait began less than burst
// before now: a server that asks several things at once sends them
// together (roundGather), so a request of such a burst may still be its.
// Of the requests left, all must belong to one session. When none is left
// (every call in flight has waited longer), they all count.
func (c *callRegistry) only(server string, now time.Time, burst time.Duration) (*request, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var free, waiting []*request
	for f := range c.m[server] {
		if f.ctx.Err() != nil {
			continue
		}
		waiting = append(waiting, f.r)
		if since, asking := f.r.askingSince(); !asking || now.Sub(since) < burst {
			free = append(free, f.r)
		}
	}
	if len(free) == 0 {
		free = waiting
	}
	sessions := map[*session]bool{}
	for _, r := range free {
		sessions[r.sess] = true
	}
	if len(sessions) != 1 {
		return nil, len(sessions)
	}
	return free[0], 1
}

// startAsking counts a server request made during r that waits for the
// client's answer; the returned func ends the wait.
func (r *request) startAsking(now time.Time) (done func()) {
	r.askMu.Lock()
	if r.asking == 0 {
		r.askSince = now
	}
	r.asking++
	r.askMu.Unlock()
	return func() {
		r.askMu.Lock()
		r.asking--
		r.askMu.Unlock()
	}
}

// askingSince reports whether r waits for answers to server requests, and
// since when (the first of those still unanswered was made).
func (r *request) askingSince() (time.Time, bool) {
	r.askMu.Lock()
	defer r.askMu.Unlock()
	return r.askSince, r.asking > 0
}

// ofSession returns a request of s in flight to server, nil when none.
func (c *callRegistry) ofSession(server string, s *session) *request {
	c.mu.Lock()
	defer c.mu.Unlock()
	for f := range c.m[server] {
		if f.ctx.Err() == nil && f.r.sess == s {
			return f.r
		}
	}
	return nil
}

// inFlight returns the requests in flight to server.
func (c *callRegistry) inFlight(server string) []*request {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*request, 0, len(c.m[server]))
	seen := map[*request]bool{}
	for f := range c.m[server] {
		if f.ctx.Err() == nil && !seen[f.r] {
			seen[f.r] = true
			out = append(out, f.r)
		}
	}
	return out
}

func refuse(code int, format string, a ...any) error {
	return &upstream.RPCError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// OnUpstreamRequest answers an upstream's sampling/createMessage,
// elicitation/create or roots/list by asking the client of the request it
// belongs to. It is upstream.Options.OnRequest.
func (rl *relay) onRequest(ctx context.Context, srv, method string, params json.RawMessage) (res json.RawMessage, err error) {
	r := requestFrom(ctx)
	n := 1
	if t, ok := rl.relatedTask(srv, params); ok {
		// A request about a task goes to the session that created it,
		// naming the task by the proxy's id: on the stream of its request
		// in flight to the server (tasks/result) when it has one, else on
		// the session's own. The client's answer names the proxy's id
		// too: the server gets its own back.
		params = retagRelated(params, t.id)
		defer func() { res = retagRelated(res, t.upID) }()
		if r == nil || taskOwner(r.sess) != t.owner {
			r = rl.calls.ofSession(srv, t.sess)
		}
		if r == nil {
			return rl.dispatch(ctx, srv, method, params, taskAsker{t.sess})
		}
	}
	if r == nil {
		r, n = rl.calls.only(srv, time.Now(), rl.roundGather())
	}
	if r != nil {
		defer func() { r.noteMissing(err) }()
		// While r waits for this answer it is not the one asking anything
		// else of the server (callRegistry.only).
		defer r.startAsking(time.Now())()
	}
	if r != nil && r.sess.state.Parked() != nil {
		return rl.dispatch(ctx, srv, method, params, parkedAsker{rl, r.sess.state.Parked()})
	}
	if r == nil {
		if method == "roots/list" {
			return rl.rootsWithoutCall(ctx, srv)
		}
		if method == "sampling/createMessage" {
			rl.opts.Metrics.Sampling(srv, "unroutable")
		}
		if n == 0 {
			return nil, refuse(codeRefused, "%s from MCP server '%s' refused: no client call to this server is in flight", method, srv)
		}
		return nil, refuse(codeRefused, "%s from MCP server '%s' refused: %d client sessions have calls in flight to this server, "+
			"and the request does not say which one it belongs to", method, srv, n)
	}
	if r.modern && r.sess.transport == transportHTTP {
		// A stateless request over HTTP that is not parked (a completion,
		// a subscription) has no stream to take a server request on, nor
		// a result that could carry it.
		if method == "sampling/createMessage" {
			rl.opts.Metrics.Sampling(srv, "unsupported")
		}
		return nil, refuse(codeMethodNotFound, "%s from MCP server '%s' refused: the client uses the stateless %s protocol "+
			"over HTTP and this request's result cannot carry an input request", method, srv, modernVersion)
	}
	return rl.dispatch(ctx, srv, method, params, sessionAsker{r})
}

// noteMissing records on r a refusal for a capability its client lacks
// (the first one), so that r fails as the client's era wants it.
func (r *request) noteMissing(err error) {
	var mc *missingCapability
	if errors.As(err, &mc) {
		r.missing.CompareAndSwap(nil, mc)
	}
}

// missingError is the -32021 error of a 2026-07-28 client's request during
// which a server asked for a capability the client did not declare; nil
// otherwise (a session-era client's request ends as the server decides).
func (r *request) missingError() *wireError {
	if mc := r.missing.Load(); mc != nil && r.modern {
		return mc.wire()
	}
	return nil
}

// asker puts a server's request to the client it is for.
type asker interface {
	// caps are the capabilities the client declared.
	caps() clientCaps
	// ask puts the request to the client and waits for its answer, at most
	// within (0: as long as ctx allows).
	ask(ctx context.Context, method string, params json.RawMessage, within time.Duration) (json.RawMessage, error)
}

// dispatch is the one place a server's request to a client is decided,
// whichever way the client is asked (sessionAsker, parkedAsker): sampling
// under the server's governance (relaySampling), elicitation when the
// client takes its mode, within the server's timeout (a person answers),
// roots from the client when it has them, else the configured ones.
func (rl *relay) dispatch(ctx context.Context, srv, method string, params json.RawMessage, c asker) (json.RawMessage, error) {
	caps := c.caps()
	switch method {
	case "sampling/createMessage":
		return rl.relaySampling(ctx, srv, caps, params, func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
			return c.ask(ctx, method, params, 0) // relaySampling bounds ctx by the server's sampling timeout
		})
	case "elicitation/create":
		if err := elicitationSupported(caps, params); err != nil {
			return nil, err
		}
		return c.ask(ctx, method, params, rl.serverTimeout(srv))
	default: // roots/list
		if !caps.roots {
			return rl.configuredRoots(srv), nil
		}
		return c.ask(ctx, method, emptyIfNil(params), rl.serverTimeout(srv))
	}
}

// sessionAsker asks the client of a session-based request (or of a
// stateless request over stdio) on its own stream.
type sessionAsker struct{ r *request }

func (a sessionAsker) caps() clientCaps { return a.r.caps }

func (a sessionAsker) ask(ctx context.Context, method string, params json.RawMessage, within time.Duration) (json.RawMessage, error) {
	if within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
	}
	res, err := a.r.sess.ask(ctx, a.r, method, params)
	if err != nil {
		return nil, refuse(codeRefused, "the client did not answer the %s request: %s", method, sanitize.Error(err.Error()))
	}
	return res, nil
}

// taskAsker asks the client of a session on the session's own stream: a
// server's request about a task of the session while no request of it is
// in flight to the server.
type taskAsker struct{ s *session }

func (a taskAsker) caps() clientCaps {
	if c := a.s.state.Client(); c != nil {
		return c.caps
	}
	return clientCaps{}
}

func (a taskAsker) ask(ctx context.Context, method string, params json.RawMessage, within time.Duration) (json.RawMessage, error) {
	if within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
	}
	res, err := a.s.ask(ctx, nil, method, params)
	if err != nil {
		return nil, refuse(codeRefused, "the client did not answer the %s request: %s", method, sanitize.Error(err.Error()))
	}
	return res, nil
}

// elicitationSupported checks that the client takes the elicitation's mode.
func elicitationSupported(caps clientCaps, params json.RawMessage) error {
	mode, _ := stringMember(params, "mode")
	switch {
	case mode == "url" && !caps.elicitationURL:
		return &missingCapability{elicitURL: true}
	case mode != "url" && !caps.elicitation:
		return &missingCapability{elicitForm: true}
	}
	return nil
}

// rootsWithoutCall answers a roots/list that no call in flight owns:
// over stdio the one client is asked when it has roots (once it has sent
// notifications/initialized, at most the server's timeout); otherwise, or
// when that fails, the server's configured roots, else an empty list,
// which servers such as server-filesystem take as "keep the directories
// given on the command line".
func (rl *relay) rootsWithoutCall(ctx context.Context, srv string) (json.RawMessage, error) {
	var stdio *session
	rl.sessions.each(func(s *session) {
		if s.transport == transportStdio {
			stdio = s
		}
	})
	if stdio != nil && stdio.agent.Granted(srv) {
		if c := stdio.state.Client(); c != nil && c.caps.roots {
			tctx, cancel := context.WithTimeout(ctx, rl.serverTimeout(srv))
			defer cancel()
			if res, err := stdio.ask(tctx, nil, "roots/list", json.RawMessage(`{}`)); err == nil {
				return res, nil
			}
		}
	}
	return rl.configuredRoots(srv), nil
}

// configuredRoots is a roots/list result of the server's configured roots.
func (rl *relay) configuredRoots(srv string) json.RawMessage {
	type root struct {
		URI  string `json:"uri"`
		Name string `json:"name,omitempty"`
	}
	list := []root{}
	if cfg := rl.gen().cfg.Servers[srv]; cfg != nil {
		for _, r := range cfg.Roots {
			list = append(list, root{URI: r.URI, Name: r.Name})
		}
	}
	b, _ := json.Marshal(map[string]any{"roots": list}) // strings only: never fails
	return b
}

// rootsChanged passes a client's notifications/roots/list_changed on to
// every connected upstream its agent is granted, which then asks again.
func (rl *relay) rootsChanged(s *session) {
	g := rl.gen()
	for name, u := range g.ups {
		if !s.agent.Granted(name) || u.Snapshot().State != upstream.StateConnected {
			continue
		}
		if n, ok := u.(interface {
			Notify(context.Context, string, json.RawMessage) error
		}); ok {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = n.Notify(ctx, "notifications/roots/list_changed", nil)
			}()
		}
	}
}

// relaySampling applies the server's sampling governance (governSampling),
// then asks the client through send, within the server's sampling timeout.
func (rl *relay) relaySampling(ctx context.Context, srv string, caps clientCaps, params json.RawMessage,
	send func(context.Context, json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	out, timeout, err := rl.governSampling(srv, caps, params)
	if err != nil {
		return nil, err
	}
	outcome := func(o string) { rl.opts.Metrics.Sampling(srv, o) }
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := send(tctx, out)
	switch {
	case err != nil && tctx.Err() != nil && ctx.Err() == nil:
		outcome("timeout")
		return nil, refuse(codeRefused, "sampling request timed out after %s", timeout)
	case err != nil:
		outcome("error")
	default:
		outcome("ok")
	}
	return res, err
}

// governSampling applies the server's sampling governance
// (docs/protocol.md#requests-from-servers) to a sampling request and
// returns the params to put to the client and the server's sampling
// timeout: maxTokens is capped, includeContext becomes "none" (the client
// sees the proxy as one server: another upstream's context must not leak to
// this one), requested models must be allowed, and the requests of a minute
// are bounded. A refusal is counted in the sampling metric.
func (rl *relay) governSampling(srv string, caps clientCaps, params json.RawMessage) (json.RawMessage, time.Duration, error) {
	cfg := rl.gen().cfg.Servers[srv]
	if cfg == nil {
		return nil, 0, refuse(codeRefused, "sampling refused: MCP server '%s' is no longer configured", srv)
	}
	sc := cfg.Sampling
	outcome := func(o string) { rl.opts.Metrics.Sampling(srv, o) }
	if !sc.IsEnabled() {
		outcome("refused_disabled")
		return nil, 0, refuse(codeRefused, "sampling is disabled for MCP server '%s' (servers.%s.sampling.enabled)", srv, srv)
	}
	if !caps.sampling {
		outcome("unsupported")
		return nil, 0, &missingCapability{sampling: true}
	}
	var in struct {
		MaxTokens        *float64 `json:"maxTokens"`
		IncludeContext   *string  `json:"includeContext"`
		ModelPreferences *struct {
			Hints []struct {
				Name string `json:"name"`
			} `json:"hints"`
		} `json:"modelPreferences"`
	}
	if len(params) == 0 || params[0] != '{' || json.Unmarshal(params, &in) != nil {
		outcome("invalid")
		return nil, 0, refuse(codeInvalidParams, "invalid sampling/createMessage params")
	}
	if mp := in.ModelPreferences; len(sc.AllowedModels) > 0 && mp != nil && len(mp.Hints) > 0 {
		allowed := false
		for _, h := range mp.Hints {
			for _, a := range sc.AllowedModels {
				allowed = allowed || h.Name == a
			}
		}
		if !allowed {
			outcome("refused_model")
			return nil, 0, refuse(codeRefused, "sampling refused: none of the requested models is in servers.%s.sampling.allowed_models", srv)
		}
	}
	if !rl.sampling.allow(srv, sc.MaxRPM, time.Now()) {
		outcome("refused_rate")
		return nil, 0, refuse(codeRefused, "sampling refused: MCP server '%s' made more than %d requests in the last minute (servers.%s.sampling.max_rpm)", srv, sc.MaxRPM, srv)
	}
	out := params
	if in.MaxTokens == nil || *in.MaxTokens <= 0 || *in.MaxTokens > float64(sc.MaxTokensCap) {
		out, _ = rawjson.Set(out, "maxTokens", []byte(fmt.Sprint(sc.MaxTokensCap))) // the cap bounds what one request may cost
	}
	if in.IncludeContext != nil && *in.IncludeContext != "none" {
		out, _ = rawjson.Set(out, "includeContext", []byte(`"none"`))
	}
	return out, sc.Timeout.D(), nil
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
// the call it belongs to, log messages to the clients granted the server
// (with the server's name as logger), resource updates to the subscribers.
// It is upstream.Options.OnNotification.
func (rl *relay) onNotification(srv, method string, params json.RawMessage) {
	switch method {
	case "notifications/progress":
		rl.progress.deliver(srv, params)
	case "notifications/message":
		rl.forwardLog(srv, params)
	case "notifications/resources/updated":
		rl.watchers.resourceUpdated(srv, params)
	case "notifications/tasks/status":
		rl.taskStatusChanged(srv, params)
	}
}

// forwardLog sends an upstream log message to every session whose agent is
// granted the server and whose level admits it: on the stream of a request
// of that session in flight to the server when there is one (so that a log
// written during a call arrives with the call), else on the session's own
// stream. A stateless client gets it on its request's stream only when
// that request asked for logs (its _meta log level). A message about a
// task a client created through the proxy (related-task metadata) goes
// to that client's session only, naming the proxy's id (tasks.go).
func (rl *relay) forwardLog(srv string, params json.RawMessage) {
	level, err := stringMember(params, "level")
	if err != nil || levelIndex(level) < 0 {
		return
	}
	out, err := rawjson.Set(params, "logger", rawjson.String(srv))
	if err != nil {
		return
	}
	if t, ok := rl.relatedTask(srv, params); ok {
		// A message about a task is for the session that created it, under
		// the proxy's id: on the stream of its request in flight to the
		// server when it has one, else on its own.
		if t.sess == nil || !t.sess.agent.Granted(srv) || !t.sess.wantsLog(level) {
			return
		}
		msg := notification("notifications/message", retagRelated(out, t.id))
		if r := rl.calls.ofSession(srv, t.sess); r != nil {
			_ = r.out.send(msg)
		} else {
			t.sess.sendUnowned(msg)
		}
		return
	}
	msg := notification("notifications/message", out)
	served := map[*session]bool{}
	for _, r := range rl.calls.inFlight(srv) {
		if served[r.sess] {
			continue
		}
		if r.modern {
			if want, _ := stringMember(r.meta, metaLogLevel); want != "" && levelIndex(level) >= levelIndex(want) {
				_ = r.out.send(msg)
			}
			continue
		}
		if r.sess.agent.Granted(srv) && r.sess.wantsLog(level) {
			served[r.sess] = true
			_ = r.out.send(msg)
		}
	}
	rl.sessions.each(func(s *session) {
		if !served[s] && s.open.Load() && s.agent.Granted(srv) && s.wantsLog(level) {
			s.sendUnowned(msg)
		}
	})
}

// emptyIfNil is params, or {} when there are none.
func emptyIfNil(params json.RawMessage) json.RawMessage {
	if len(params) == 0 {
		return json.RawMessage(`{}`)
	}
	return params
}
