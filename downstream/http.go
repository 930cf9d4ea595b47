package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/authn"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The Streamable HTTP transport (MCP 2025-11-25 "Streamable HTTP", and the
// stateless 2026-07-28 core on the same endpoint). It only frames: POST
// bodies become messages for the route, responses and the messages that
// precede them go back as JSON or as an SSE stream, GET opens a session's
// stream for messages no request owns, DELETE ends a session.

// Header names of the transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
	headerLastEventID     = "Last-Event-ID"
)

// heartbeatInterval keeps idle GET streams alive through proxies and load
// balancers that cut silent connections after a minute.
const heartbeatInterval = 25 * time.Second

// writeTimeout bounds one write to an HTTP client (a response, an event):
// a client that stops reading is cut off instead of holding the handler.
// It is set before each write, so a long call waits as long as it needs to
// and its stream stays open as long as it runs.
const writeTimeout = time.Minute

// agentPathPattern serves one agent per path (docs/agents.md#over-http).
const agentPathPattern = "/agents/{agent}/mcp"

// httpFront is the HTTP side of the proxy: the endpoints, the idle sweep of
// sessions, and the count of requests being answered (for shutdown).
type httpFront struct {
	*env
	route    messageRoute
	sessions *sessionTable
	agents   agentResolver

	active atomic.Int64 // POSTs being answered
	// bound is the address the listener bound (the default public URL);
	// auth authenticates requests for the current config.
	bound string
	auth  atomic.Pointer[authn.Authenticator]

	sweepOnce sync.Once
	stop      chan struct{}
	swept     chan struct{} // closed when the sweeper has ended
}

func newHTTPFront(e *env, route messageRoute, sessions *sessionTable, agents agentResolver) *httpFront {
	return &httpFront{env: e, route: route, sessions: sessions, agents: agents, stop: make(chan struct{}), swept: make(chan struct{})}
}

// HTTPHandler returns the Streamable HTTP handler of a listener bound to
// boundAddr (host:port; it makes the default public URL): the MCP endpoint
// at listen.path for the default agent and /agents/<alias>/mcp for each
// agent, their OAuth protected resource metadata when listen.auth is set
// (docs/security.md#oauth-on-the-http-listener), plus /healthz and /readyz. It starts the sweep of idle
// sessions, which ShutdownHTTP stops.
func (f *httpFront) handler(boundAddr string) http.Handler {
	f.bound = boundAddr
	f.auth.Store(f.newAuthenticator(f.gen().cfg))
	f.sweepOnce.Do(func() { go f.sweep() })
	mux := http.NewServeMux()
	mux.Handle(f.gen().cfg.Listen.Path, f.endpoint(false))
	mux.Handle(agentPathPattern, f.endpoint(true))
	meta := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.auth.Load().MetadataHandler().ServeHTTP(w, r) })
	mux.Handle(authn.WellKnownPath, meta)
	mux.Handle(authn.WellKnownPath+"/", meta)
	mux.HandleFunc("/healthz", f.healthz)
	mux.HandleFunc("/readyz", f.readyz)
	return mux
}

// newAuthenticator authenticates the HTTP requests of cfg's agents.
func (f *httpFront) newAuthenticator(cfg *config.Config) *authn.Authenticator {
	return authn.New(cfg, authn.Options{BoundAddr: f.bound, Metrics: f.opts.Metrics, Log: f.log})
}

// reload makes the authenticator of a new config serve new requests (new
// tokens and match rules), once the handler is made.
func (f *httpFront) reload(cfg *config.Config) {
	if f.auth.Load() != nil {
		f.auth.Store(f.newAuthenticator(cfg))
	}
}

// endpoint serves the MCP endpoint of one agent: the default agent, or the
// one named in the path. Before reading anything it refuses a
// non-loopback Host on a loopback listener and foreign Origins (403, DNS
// rebinding), then lets the authenticator decide who the client is: an
// unknown agent path is 404 with a fixed text (only the default path
// without a default_agent lists the agents, docs/agents.md#agents-bundles-and-policy), a missing or bad
// credential 401, a token of another agent 403 (authn). The client's Authorization
// header is dropped there: nothing downstream of this can forward it.
func (f *httpFront) endpoint(fromPath bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		if !originAllowed(r) {
			http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not allowed", r.Header.Get("Origin")), http.StatusForbidden)
			return
		}
		pathAgent := ""
		if fromPath {
			pathAgent = r.PathValue("agent")
		}
		who, fail := f.auth.Load().Authenticate(r, pathAgent)
		if fail != nil {
			fail.Write(w)
			return
		}
		r.Header.Del("Authorization")
		c := client{agent: who.Agent, principal: principalOf(who)}
		switch r.Method {
		case http.MethodPost:
			f.post(w, r, c)
		case http.MethodGet:
			f.get(w, r, c)
		case http.MethodDelete:
			f.delete(w, r, c)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// client is who an HTTP request comes from: its agent, and who within it.
type client struct {
	agent     string
	principal principal
}

func principalOf(p *authn.Principal) principal {
	switch p.Method {
	case authn.MethodOAuth:
		return principal{subject: p.Subject}
	case authn.MethodStatic:
		return principal{token: p.TokenIndex + 1}
	}
	return principal{}
}

// post answers one POST: one JSON-RPC message, or a batch of them.
func (f *httpFront) post(w http.ResponseWriter, r *http.Request, c client) {
	f.active.Add(1)
	defer f.active.Add(-1)
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		jsonError(w, http.StatusUnsupportedMediaType, nil, codeInvalidRequest, "invalid content type: must be application/json")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			jsonError(w, http.StatusRequestEntityTooLarge, nil, codeInvalidRequest, fmt.Sprintf("request body exceeds the %d-byte limit", maxRequestBytes))
			return
		}
		jsonError(w, http.StatusBadRequest, nil, codeParseError, "cannot read the request body")
		return
	}
	if !utf8.Valid(body) {
		jsonError(w, http.StatusBadRequest, nil, notUTF8.Code, notUTF8.Message)
		return
	}
	msgs, batch, werr := splitBody(body)
	if werr != nil {
		jsonError(w, http.StatusBadRequest, nil, werr.Code, werr.Message)
		return
	}
	first, ferr := parseMessage(msgs[0]) // a parse error is answered with the message's reply below
	hv := r.Header.Get(headerProtocolVersion)
	mv, _ := stringMember(metaOf(first.Params), metaProtocolVersion)
	if isModern(hv) || isModern(mv) {
		f.postStateless(w, r, c, batch, first, hv, mv)
		return
	}
	if hv != "" && first.Method != "initialize" && !slices.Contains(protocolVersions, hv) {
		jsonError(w, http.StatusBadRequest, first.ID, codeInvalidRequest, fmt.Sprintf("unsupported protocol version in %s: %q", headerProtocolVersion, truncate(hv, 40)))
		return
	}
	var s *session // with this POST begun on it (activity), ended below
	var pre *prepaid
	if first.Method == "initialize" && !batch {
		var err error
		if s, err = f.openSession(r, c); err != nil {
			jsonError(w, http.StatusServiceUnavailable, first.ID, codeServerError, sanitize.Error(err.Error()))
			return
		}
		w.Header().Set(headerSessionID, s.id)
	} else {
		sid := r.Header.Get(headerSessionID)
		switch {
		case sid == "" && batch:
			werr := batchRefusal("") // no session: no version negotiated
			jsonError(w, http.StatusBadRequest, nil, werr.Code, werr.Message)
			return
		case sid == "":
			jsonError(w, http.StatusBadRequest, first.ID, codeInvalidRequest, "Bad Request: the "+headerSessionID+" header is required after initialize")
			return
		}
		var tool string
		if !batch && first.Method == "tools/call" && f.sessions.prepays() {
			tool, _ = stringMember(first.Params, "name")
		}
		var err error
		if s, pre, err = f.sessions.acquire(r.Context(), c, sid, tool); err != nil {
			jsonError(w, http.StatusServiceUnavailable, first.ID, codeServerError, sanitize.Error(err.Error()))
			return
		}
		if s == nil {
			jsonError(w, http.StatusNotFound, first.ID, codeInvalidRequest, "Session not found")
			return
		}
		if pre != nil {
			defer pre.giveBack(r.Context()) // unless the call used it
		}
	}
	defer s.activity.end()
	if batch { // the refusal is built only for a batch: its text is formatted
		if werr := batchRefusal(s.version()); werr != nil {
			jsonError(w, http.StatusBadRequest, nil, werr.Code, werr.Message)
			return
		}
	}
	f.serve(w, r, s, msgs, first, ferr == nil, batch, pre) // first handed over, not parsed again
}

// isJSONContentType reports whether a Content-Type header names
// application/json (any case, any parameters). The value clients send,
// exactly "application/json", is taken without parsing.
func isJSONContentType(v string) bool {
	if v == "application/json" {
		return true
	}
	mt, _, _ := mime.ParseMediaType(v)
	return mt == "application/json"
}

// openSession starts the HTTP session an initialize creates, with the
// initialize begun on it (the caller ends it with s.activity.end()), so
// the idle sweep cannot close it before it is answered. The per-call
// allow-list comes from its header (docs/agents.md#the-policy-rules, rule 5).
// With a Redis store the session is recorded there first; the error is the
// store's.
func (f *httpFront) openSession(r *http.Request, c client) (*session, error) {
	a, _ := f.agents.resolveAgent(c.agent) // authn checked it exists
	s := newSession(newID(), transportHTTP, a, perCallHeader(r.Header))
	s.principal = c.principal
	if err := f.sessions.create(r.Context(), s); err != nil {
		s.close()
		return nil, err
	}
	s.activity.begin()
	f.sessions.add(s)
	return s, nil
}

// perCallHeader reads the per-call allow-list header; nil when absent.
func perCallHeader(h http.Header) []string {
	v, ok := h[http.CanonicalHeaderKey(allowedToolsHeader)]
	return ParseAllowedTools(strings.Join(v, ","), ok)
}

// serve routes the messages of one POST of session s and writes what
// answers them: 202 when nothing does (notifications, the client's
// answers), else the responses, as JSON or on an SSE stream when other
// messages (progress, the proxy's questions) precede them. When parsed is
// set, first is msgs[0] already parsed; pre (nil: none) is what its
// tools/call took with the session's read, which its request carries.
func (f *httpFront) serve(w http.ResponseWriter, r *http.Request, s *session, msgs [][]byte, first rawjson.Message, parsed, batch bool, pre *prepaid) {
	ps := newPostStream(w, r)
	answer := f.route.receiveBatch(r.Context(), s, msgs, first, parsed, batch, ps, inbound{header: r.Header, prepaid: pre})
	ps.finish(answer(), batch, http.StatusOK)
}

// postStateless answers a POST of the stateless 2026-07-28 protocol: no
// session; each request carries its own version, capabilities and client
// info in _meta, and its HTTP headers must agree with its body. A server
// request an upstream raises during it reaches the client through a multi
// round-trip (roundtrip.go).
func (f *httpFront) postStateless(w http.ResponseWriter, r *http.Request, c client, batch bool, first rawjson.Message, hv, mv string) {
	if batch {
		version := hv
		if !isModern(version) {
			version = mv
		}
		werr := batchRefusal(version)
		jsonError(w, http.StatusBadRequest, nil, werr.Code, werr.Message)
		return
	}
	if first.Kind == rawjson.KindNotification {
		// Notifications carry no _meta (a cancellation is the client
		// closing its request): nothing to check, nothing to answer.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	status, werr := checkStatelessHeaders(r.Header, first, hv, mv)
	if werr != nil {
		jsonError(w, status, first.ID, werr.Code, werr.Message, werr.Data)
		return
	}
	a, _ := f.agents.resolveAgent(c.agent)
	s := newSession("", transportHTTP, a, perCallHeader(r.Header))
	s.principal = c.principal
	defer s.close()
	ps := newPostStream(w, r)
	// first parsed: one that did not has no _meta version, which
	// checkStatelessHeaders refused.
	refusal, code, run := f.route.receiveMessage(r.Context(), s, first, ps, inbound{header: r.Header})
	rep := whole(refusal)
	if run != nil {
		rep, code = run()
	}
	if rep.size() == 0 {
		ps.finish(nil, false, http.StatusAccepted) // under ps's lock: nothing writes after it
		return
	}
	ps.finish([]reply{rep}, false, statelessStatus(code))
}

// checkStatelessHeaders applies the transport checks of a 2026-07-28
// POST: the version in the header and in _meta agree and are served; the
// method (and for calls, reads and prompts the name) in the headers match
// the body; no Last-Event-ID (streams are not resumable). It returns the
// status and error to answer with.
func checkStatelessHeaders(h http.Header, m rawjson.Message, hv, mv string) (int, *wireError) {
	switch {
	case m.Kind == rawjson.KindResponse:
		return http.StatusBadRequest, errorf(codeInvalidRequest, "client-to-server responses are not supported in protocol version %s: "+
			"server-initiated requests were replaced by multi round-trip requests", modernVersion)
	case h.Get(headerLastEventID) != "":
		return http.StatusBadRequest, errorf(codeHeaderMismatch, "%s is not supported in protocol version %s: streams are not resumable, "+
			"re-issue the request with a new ID", headerLastEventID, modernVersion)
	case hv == "":
		return http.StatusBadRequest, errorf(codeHeaderMismatch, "%s header is required for requests carrying %s", headerProtocolVersion, metaProtocolVersion)
	case mv == "":
		return http.StatusBadRequest, errorf(codeInvalidParams, "missing or invalid _meta field %s", metaProtocolVersion)
	case hv != mv:
		return http.StatusBadRequest, errorf(codeHeaderMismatch, "%s header %s does not match request %s %s", headerProtocolVersion,
			truncate(hv, 40), metaProtocolVersion, truncate(mv, 40))
	case !slices.Contains(protocolVersions, mv):
		return http.StatusBadRequest, unsupportedVersion(mv)
	}
	if got := h.Get(headerMethod); got != m.Method {
		if got == "" {
			return http.StatusBadRequest, errorf(codeHeaderMismatch, "header mismatch: %s: missing required header", headerMethod)
		}
		return http.StatusBadRequest, errorf(codeHeaderMismatch, "header mismatch: %s: header value %q does not match body value %q",
			headerMethod, truncate(got, 100), truncate(m.Method, 100))
	}
	member := map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}[m.Method]
	if member == "" {
		return 0, nil
	}
	vals, ok := h[http.CanonicalHeaderKey(headerName)]
	if !ok {
		return http.StatusBadRequest, errorf(codeHeaderMismatch, "header mismatch: %s: missing required header for method %q", headerName, m.Method)
	}
	if len(vals) > 1 {
		return http.StatusBadRequest, headerMismatch(headerName, "the header is sent more than once")
	}
	if !headerValueOK(vals[0]) {
		return http.StatusBadRequest, headerMismatch(headerName, "the value has characters a header value must not have; send it as =?base64?…?=")
	}
	// A value that is not plain ASCII comes as "=?base64?<base64 of its
	// UTF-8>?=", decoded as the proxy's own requests upstream encode it
	// (mcp-go's, upstream/modern.go).
	got, ok := mcp.DecodeHeaderValue(vals[0])
	if !ok {
		return http.StatusBadRequest, headerMismatch(headerName, "invalid base64 in =?base64?…?=")
	}
	if want, _ := stringMember(m.Params, member); got != want {
		return http.StatusBadRequest, errorf(codeHeaderMismatch, "header mismatch: %s: header value %q does not match body value %q",
			headerName, truncate(got, 100), truncate(want, 100))
	}
	return 0, nil
}

// statelessStatus is the HTTP status of a stateless response, which the
// 2026-07-28 transport derives from its JSON-RPC error code (0: none).
func statelessStatus(code int) int {
	switch code {
	case codeMethodNotFound:
		return http.StatusNotFound
	case codeHeaderMismatch, codeMissingCapability, codeUnsupportedVersion, codeInvalidRequest, codeInvalidParams, codeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// get opens a session's stream for the messages no request owns
// (list_changed, log messages, resource updates). A newer GET replaces an
// older one, which ends: each message goes out on one stream only.
func (f *httpFront) get(w http.ResponseWriter, r *http.Request, c client) {
	if isModern(r.Header.Get(headerProtocolVersion)) {
		w.Header().Set("Allow", "POST")
		http.Error(w, "GET is not supported in protocol version "+modernVersion+": server-to-client messages use subscriptions/listen", http.StatusMethodNotAllowed)
		return
	}
	sid := r.Header.Get(headerSessionID)
	if sid == "" {
		http.Error(w, "Bad Request: the "+headerSessionID+" header is required", http.StatusBadRequest)
		return
	}
	if _, ok := w.(http.Flusher); !ok {
		http.Error(w, "Streaming unsupported", http.StatusMethodNotAllowed)
		return
	}
	s, _, err := f.sessions.acquire(r.Context(), c, sid, "")
	if err != nil {
		http.Error(w, sanitize.Error(err.Error()), http.StatusServiceUnavailable)
		return
	}
	if s == nil {
		http.Error(w, "Session not found", http.StatusNotFound)
		return
	}
	defer s.activity.end()
	gs := &getStream{w: w, rc: http.NewResponseController(w)}
	defer gs.close()
	defer f.cross.hold(s)() // with a Redis store: messages raised on other replicas come here
	gs.open()
	ended := s.notify.attach(gs)
	if ended == nil {
		return
	}
	defer s.notify.detach(gs)
	tick := time.NewTicker(heartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ended:
			return
		case <-tick.C:
			if gs.comment("keepalive") != nil {
				return
			}
			s.activity.touch()
		}
	}
}

// delete ends a session (200); an unknown one is 404.
func (f *httpFront) delete(w http.ResponseWriter, r *http.Request, c client) {
	if isModern(r.Header.Get(headerProtocolVersion)) {
		w.Header().Set("Allow", "POST")
		http.Error(w, "DELETE is not supported in protocol version "+modernVersion+": there are no sessions", http.StatusMethodNotAllowed)
		return
	}
	found, err := f.sessions.end(r.Context(), c, r.Header.Get(headerSessionID))
	switch {
	case err != nil:
		http.Error(w, sanitize.Error(err.Error()), http.StatusServiceUnavailable)
		return
	case !found:
		http.Error(w, "Session not found", http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// sweep closes idle sessions until ShutdownHTTP.
func (f *httpFront) sweep() {
	defer close(f.swept)
	idle := f.idleTimeout()
	if idle <= 0 {
		<-f.stop
		return
	}
	t := time.NewTicker(max(idle/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			if n := f.sessions.closeIdle(idle); n > 0 {
				f.log.Debug().Int("sessions", n).Dur("idle", idle).Msg("idle HTTP sessions closed")
			}
		}
	}
}

// ShutdownHTTP ends the HTTP side gracefully: it waits until no POST is
// being answered (or ctx ends), then closes every HTTP session, which ends
// the long-lived GET streams that would otherwise keep
// http.Server.Shutdown waiting. Call it after http.Server.Shutdown has
// stopped new requests.
func (f *httpFront) shutdown(ctx context.Context) {
	select {
	case <-f.stop:
	default:
		close(f.stop) // ends the sweep and every subscriptions/listen
	}
	for f.active.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	f.sessions.closeHTTP()
	f.sweepOnce.Do(func() { close(f.swept) }) // never started: nothing to wait for
	<-f.swept
}

// jsonError answers a request the transport refuses with a JSON-RPC error
// (the SDKs read a JSON body; a text one ends some clients' connections).
// The id is the request's when it could be read.
func jsonError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data ...json.RawMessage) {
	werr := &wireError{Code: code, Message: msg}
	if len(data) > 0 {
		werr.Data = data[0]
	}
	if rawjson.IsNull(id) {
		id = nil
	}
	body := append(errorResponse(id, werr), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// healthz answers 200 while the process serves.
func (f *httpFront) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// readyz answers 200 once every `required` server is connected and the
// shared-state store answers, else 503 naming what is not ready.
func (f *httpFront) readyz(w http.ResponseWriter, r *http.Request) {
	var missing []string
	if st := f.opts.Store; st != nil {
		if err := st.Ready(r.Context()); err != nil {
			missing = append(missing, "store ("+err.Error()+")")
		}
	}
	g := f.gen()
	for _, name := range g.serverNames() {
		if g.cfg.Servers[name].Required && g.ups[name].Snapshot().State != upstream.StateConnected {
			missing = append(missing, name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(missing) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "not ready: %s\n", strings.Join(missing, ", "))
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}
