package downstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// sessionIdleTTL ends HTTP sessions whose client went away without DELETE
// (mcp-go keeps them forever otherwise).
const sessionIdleTTL = 30 * time.Minute

// heartbeatInterval keeps idle GET streams alive through proxies and load
// balancers that cut silent connections after a minute.
const heartbeatInterval = 25 * time.Second

// HTTPHandler returns the Streamable HTTP handler: the MCP endpoint at
// listen.path for the default agent, plus /healthz and /readyz.
func (p *Proxy) HTTPHandler() http.Handler {
	sessions := newSessionRegistry()
	hs := server.NewStreamableHTTPServer(p.mcp,
		server.WithSessionIdManagerResolver(sessions),
		server.WithSessionIdleTTL(sessionIdleTTL),
		server.WithHeartbeatInterval(heartbeatInterval),
		server.WithStreamableHTTPLogger(slog.New(zerolog.NewSlogHandler(p.log.Level(zerolog.WarnLevel)))),
	)
	p.httpMu.Lock()
	p.httpServers = append(p.httpServers, hs)
	p.httpSessions = sessions
	p.httpMu.Unlock()
	mux := http.NewServeMux()
	mux.Handle(p.gen().cfg.Listen.Path, p.endpoint(hs, false))
	mux.Handle(agentPathPattern, p.endpoint(hs, true))
	mux.HandleFunc("/healthz", p.healthz)
	mux.HandleFunc("/readyz", p.readyz)
	return mux
}

// agentPathPattern serves one agent per path (SPEC §4).
const agentPathPattern = "/agents/{agent}/mcp"

// defaultAgentName is the agent served when a request names none: the
// configured default_agent, or the implicit agent when there are no agents.
// It is "" when agents exist and none is the default.
func (p *Proxy) defaultAgentName() string {
	if cfg := p.gen().cfg; cfg.HasAgents() {
		return cfg.DefaultAgent
	}
	return defaultAgent
}

// endpoint serves the MCP endpoint of one agent: the default agent, or the
// one named in the path. It refuses unknown agents (404, listing the
// agents), foreign Origins (403) and missing or wrong bearer tokens (401)
// before anything reaches mcp-go.
func (p *Proxy) endpoint(next http.Handler, fromPath bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := p.defaultAgentName()
		if fromPath {
			name = r.PathValue("agent")
		}
		a, err := p.resolveAgent(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if !originAllowed(r) {
			http.Error(w, "Forbidden: Origin "+strconvQuote(r.Header.Get("Origin"))+" is not allowed", http.StatusForbidden)
			return
		}
		if !p.authorized(r, a.Name) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-proxy"`)
			http.Error(w, "Unauthorized: a valid bearer token for agent "+strconvQuote(a.Name)+" is required", http.StatusUnauthorized)
			return
		}
		p.wire(next, a.Name).ServeHTTP(w, r)
	})
}

// wire passes HTTP POSTs through the wire layer (front.go) and tags every
// request with its agent.
func (p *Proxy) wire(next http.Handler, agent string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), agentKey{}, agent)
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("request body exceeds the %d-byte limit", maxRequestBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		pd := newPending(p)
		defer pd.release()
		ww := &wireWriter{ResponseWriter: w, pd: pd}
		pd.direct = ww.inject
		p.httpCalls.Add(1)
		defer p.httpCalls.Add(-1)
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			sid := r.Header.Get(server.HeaderKeySessionID)
			if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
				sid = "" // mcp-go ignores session ids of stateless requests; so does the proxy
			} else if sid != "" && !p.sessionOf(agent, sid) {
				http.Error(w, "Session not found", http.StatusNotFound)
				return
			}
			st, err := p.stateFor(ctx, sid, r.Header)
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			if answer, _ := pd.directAnswer(body, st); answer != nil {
				p.answerDirect(w, r.WithContext(ctx), agent, answer)
				return
			}
			if statelessNotification(r, body) {
				// mcp-go wants 2026-07-28 metadata on notifications too
				// and would answer 400, which makes clients (go-sdk) drop
				// the connection. A cancellation of a stateless call also
				// arrives as the client closing that call's request.
				w.WriteHeader(http.StatusAccepted)
				return
			}
			var wait bool
			if body, wait = pd.inbound(body, st); wait {
				p.waitStartup(ctx)
				pd.prepare(ctx)
			}
		}
		r2 := r.Clone(ctx)
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		if pd.empty() {
			next.ServeHTTP(w, r2)
			return
		}
		next.ServeHTTP(ww, r2)
		ww.finish()
	})
}

// answerDirect writes the wire layer's own answer to a POST, after the
// session checks mcp-go would have made: a request of a session the proxy
// did not issue (or of another agent) is 404; a request without a session
// id is accepted only in the stateless 2026-07-28 protocol.
func (p *Proxy) answerDirect(w http.ResponseWriter, r *http.Request, agent string, answer func(context.Context) []byte) {
	sid := r.Header.Get(server.HeaderKeySessionID)
	p.httpMu.Lock()
	reg := p.httpSessions
	p.httpMu.Unlock()
	switch {
	case sid != "":
		if _, err := (agentSessions{reg: reg, agent: agent}).Validate(sid); err != nil {
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
	case !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)):
		http.Error(w, "Bad Request: Mcp-Session-Id header must be provided", http.StatusBadRequest)
		return
	}
	out := answer(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(out)+1))
	_, _ = w.Write(append(out, '\n'))
}

// sessionOf reports whether sid is a live session of agent's endpoint.
func (p *Proxy) sessionOf(agent, sid string) bool {
	p.httpMu.Lock()
	reg := p.httpSessions
	p.httpMu.Unlock()
	if reg == nil {
		return false
	}
	terminated, err := (agentSessions{reg: reg, agent: agent}).Validate(sid)
	return err == nil && !terminated
}

// statelessNotification reports a notification from a client of the
// stateless 2026-07-28 protocol that carries no protocol metadata.
func statelessNotification(r *http.Request, body []byte) bool {
	if r.Header.Get(server.HeaderKeySessionID) != "" || !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return false
	}
	env, ok := readEnvelope(body)
	if !ok || len(env.ID) > 0 || env.Method == "" {
		return false
	}
	meta, _, _ := rawjson.Get(env.Params, "_meta")
	return !isModernMeta(meta)
}

// ShutdownHTTP ends the HTTP side gracefully: it waits until no tool call
// is in flight (or ctx ends), then closes every session, which ends the
// long-lived GET streams that would otherwise keep http.Server.Shutdown
// waiting. Call it after http.Server.Shutdown has stopped new requests.
func (p *Proxy) ShutdownHTTP(ctx context.Context) {
	for p.httpCalls.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.httpMu.Lock()
	servers := p.httpServers
	p.httpMu.Unlock()
	for _, hs := range servers {
		hs.CloseSessions(ctx)
	}
}

// wireWriter passes the response to one POST through pending.outbound. A
// JSON response is held until it is complete; an SSE response is rewritten
// event by event and flushed as it goes. inject writes the proxy's own
// messages (a call's progress) into the same stream, turning a response
// that would have been JSON into SSE, so that they precede the response:
// mcp-go's session queue would let the response overtake them.
type wireWriter struct {
	http.ResponseWriter
	pd *pending

	mu      sync.Mutex // mcp-go and the progress sender write concurrently
	mode    int
	status  int
	buf     []byte
	forced  bool // the proxy switched the response to SSE
	mcpgoSS bool // mcp-go itself chose SSE after the switch
	done    bool // finish ran: the response is over, inject drops what comes late
}

const (
	modeUndecided = iota
	modeJSON
	modeSSE
	modePass
)

func (w *wireWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(code)
}

func (w *wireWriter) writeHeaderLocked(code int) {
	ct := w.Header().Get("Content-Type")
	if w.forced {
		// Headers are out already (SSE): keep mcp-go's body in the right
		// shape for finish.
		w.mcpgoSS = strings.HasPrefix(ct, "text/event-stream")
		if w.mcpgoSS {
			w.mode = modeSSE
		}
		return
	}
	if w.mode != modeUndecided {
		return
	}
	switch {
	case strings.HasPrefix(ct, "application/json"):
		w.mode, w.status = modeJSON, code
		w.Header().Del("Content-Length")
		return // written by finish, with the rewritten body
	case strings.HasPrefix(ct, "text/event-stream"):
		w.mode = modeSSE
	default:
		w.mode = modePass
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *wireWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mode == modeUndecided {
		w.writeHeaderLocked(http.StatusOK)
	}
	switch w.mode {
	case modeJSON:
		w.buf = append(w.buf, b...)
	case modeSSE:
		w.buf = append(w.buf, b...)
		if err := w.writeEvents(); err != nil {
			return 0, err
		}
	default:
		return w.ResponseWriter.Write(b)
	}
	return len(b), nil
}

// inject writes one message of the proxy's own as an SSE event of this
// response, switching the response to SSE if it was not already.
func (w *wireWriter) inject(msg []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return // the handler has returned: the response writer is no longer ours
	}
	switch w.mode {
	case modePass:
		return // not a stream the proxy can add to
	case modeUndecided, modeJSON:
		if !w.forced {
			w.forced = true
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Del("Content-Length")
			w.ResponseWriter.WriteHeader(http.StatusOK)
			if w.mode == modeUndecided {
				w.mode = modeJSON // mcp-go's answer is buffered and sent as an event by finish
			}
		}
	}
	_, _ = w.ResponseWriter.Write([]byte("event: message\ndata: " + string(msg) + "\n\n"))
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// writeEvents writes every complete SSE event in buf, rewriting data lines.
func (w *wireWriter) writeEvents() error {
	for {
		i := bytes.Index(w.buf, []byte("\n\n"))
		if i < 0 {
			return nil
		}
		event := w.buf[:i+2]
		w.buf = w.buf[i+2:]
		if _, err := w.ResponseWriter.Write(w.rewriteEvent(event)); err != nil {
			return err
		}
	}
}

func (w *wireWriter) rewriteEvent(event []byte) []byte {
	lines := bytes.Split(event[:len(event)-2], []byte("\n"))
	changed := false
	for i, l := range lines {
		data, ok := bytes.CutPrefix(l, []byte("data: "))
		if !ok {
			continue
		}
		if out := w.pd.outbound(data); !sameBytes(out, data) {
			lines[i] = append([]byte("data: "), out...)
			changed = true
		}
	}
	if !changed {
		return event
	}
	return append(bytes.Join(lines, []byte("\n")), '\n', '\n')
}

// Flush forwards flushes of SSE responses, which must reach the client as
// they happen (progress, logs).
func (w *wireWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mode == modeJSON {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *wireWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes what is still held once the handler has returned.
func (w *wireWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	switch {
	case w.mode == modeJSON && w.forced:
		out := w.pd.outbound(bytes.TrimRight(w.buf, "\n"))
		_, _ = w.ResponseWriter.Write([]byte("event: message\ndata: " + string(out) + "\n\n"))
	case w.mode == modeJSON:
		body := bytes.TrimRight(w.buf, "\n")
		out := w.pd.outbound(body)
		w.Header().Set("Content-Length", fmt.Sprint(len(out)+1))
		w.ResponseWriter.WriteHeader(w.status)
		_, _ = w.ResponseWriter.Write(append(out, '\n'))
	case w.mode == modeSSE:
		if len(w.buf) > 0 {
			_, _ = w.ResponseWriter.Write(w.buf)
		}
	}
}

// healthz answers 200 while the process serves.
func (p *Proxy) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// readyz answers 200 once every `required` server is connected, else 503
// naming those that are not.
func (p *Proxy) readyz(w http.ResponseWriter, _ *http.Request) {
	var missing []string
	g := p.gen()
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

// Health returns the /healthz and /readyz handlers for the metrics listener.
func (p *Proxy) Health() (healthz, readyz http.HandlerFunc) { return p.healthz, p.readyz }
