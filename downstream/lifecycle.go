package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Protocol versions the proxy serves downstream, newest first: the
// session-based revisions up to 2025-11-25, and the stateless 2026-07-28
// core (docs/protocol.md#downstream-protocol).
var protocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

const (
	// modernVersion is the first stateless revision: a request that
	// declares it (or anything sorting after it, as the SDKs compare) is
	// served without a session.
	modernVersion = "2026-07-28"
	// latestSessionVersion answers an initialize naming a version the proxy
	// does not know.
	latestSessionVersion = "2025-11-25"
	// defaultSessionVersion answers an initialize naming none (the first
	// revision with Streamable HTTP, which a client that says nothing is
	// assumed to speak).
	defaultSessionVersion = "2025-03-26"
)

// The _meta keys of the stateless protocol.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
	metaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
)

func isModern(version string) bool { return version >= modernVersion }

// batchVersion is the one protocol version that has JSON-RPC batches: MCP
// added them in 2025-03-26 and removed them in 2025-06-18.
const batchVersion = "2025-03-26"

// batchRefusal is the error that refuses a JSON-RPC batch from a client
// at protocol version ("" before one is negotiated), or nil when that
// version has batches.
func batchRefusal(version string) *wireError {
	switch {
	case version == batchVersion:
		return nil
	case version == "":
		return errorf(codeInvalidRequest, "JSON-RPC batches are not supported before a protocol version is negotiated "+
			"(MCP has them only in protocol version %s)", batchVersion)
	case version < batchVersion:
		return errorf(codeInvalidRequest, "JSON-RPC batches are not supported in MCP protocol version %s (added in %s)", truncate(version, 40), batchVersion)
	}
	return errorf(codeInvalidRequest, "JSON-RPC batches are not supported in MCP protocol version %s (removed in 2025-06-18)", truncate(version, 40))
}

// notUTF8 refuses a client message that is not valid UTF-8: it is not JSON
// text (RFC 8259 §8.1), so nothing in it is read or echoed, its id neither.
var notUTF8 = errorf(codeInvalidRequest, "invalid request: the message is not valid UTF-8, as JSON text must be (RFC 8259 section 8.1)")

// capabilitiesJSON is what the proxy offers every client: tools, resources
// (with subscriptions) and prompts that change, logging and completions.
const capabilitiesJSON = `{"logging":{},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true},"completions":{}}`

// serverInfo is the proxy's serverInfo object.
func (p *Proxy) serverInfo() []byte {
	return []byte(`{"name":"mcp-proxy","version":` + string(rawjson.String(p.opts.Version)) + `}`)
}

// newRequest reads a request's protocol facts: its _meta, and whether it
// is a stateless 2026-07-28 request (then its capabilities come from its
// _meta, which must have them) or belongs to the session's handshake.
func (p *Proxy) newRequest(s *session, m rawjson.Message, out stream) (*request, *wireError) {
	r := &request{sess: s, id: m.ID, method: m.Method, params: m.Params, out: out}
	if rawjson.IsNull(m.ID) {
		return nil, errorf(codeInvalidRequest, "invalid request: the id must be a string or a number, not null")
	}
	if len(m.Params) > 0 && m.Params[0] == '{' {
		if err := rawjson.Unique(m.Params); err != nil {
			return nil, errorf(codeInvalidRequest, "invalid request: a member name appears twice in params")
		}
		if meta, ok, _ := rawjson.Get(m.Params, "_meta"); ok && meta[0] == '{' {
			if err := rawjson.Unique(meta); err != nil {
				return nil, errorf(codeInvalidRequest, "invalid request: a member name appears twice in params._meta")
			}
			r.meta = meta
		}
	}
	if v, _ := stringMember(r.meta, metaProtocolVersion); isModern(v) {
		caps, ok, _ := rawjson.Get(r.meta, metaClientCaps)
		if !ok || len(caps) == 0 || caps[0] != '{' {
			return nil, errorf(codeInvalidParams, "missing or invalid _meta field %s", metaClientCaps)
		}
		if !slices.Contains(protocolVersions, v) {
			return nil, unsupportedVersion(v)
		}
		r.modern, r.version, r.caps = true, v, parseCaps(caps)
		return r, nil
	}
	if c := s.client.Load(); c != nil {
		r.version, r.caps = c.version, c.caps
	}
	return r, nil
}

// unsupportedVersion is the error for a stateless request naming a
// version the proxy does not serve; its data lists the ones it does.
func unsupportedVersion(v string) *wireError {
	data, _ := json.Marshal(map[string]any{"supported": protocolVersions, "requested": v})
	return &wireError{Code: codeUnsupportedVersion, Data: data,
		Message: fmt.Sprintf("unsupported protocol version: %q (supported: [%s])", v, strings.Join(protocolVersions, " "))}
}

// eraCheck refuses methods that one protocol era has and the other has
// not: the stateless core removed initialize, ping, logging/setLevel and
// resource subscriptions; server/discover and subscriptions/listen exist
// only in it.
func eraCheck(next handler) handler {
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		switch r.method {
		case "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
			if r.modern {
				return nil, errorf(codeMethodNotFound, "%q was removed in protocol version %s", r.method, modernVersion)
			}
		case "server/discover", "subscriptions/listen":
			if !r.modern {
				return nil, errorf(codeMethodNotFound, "%q requires protocol version %s or later", r.method, modernVersion)
			}
		}
		return next(ctx, r)
	}
}

// cachedMethods are the methods whose stateless results say how long a
// client may cache them: not at all, since the proxy's lists change with
// its upstreams (list_changed tells the client).
var cachedMethods = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true, "server/discover": true,
}

// ownResults are the methods whose results the proxy writes itself, not
// an upstream.
var ownResults = map[string]bool{
	"server/discover": true, "tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "subscriptions/listen": true,
}

// decorate adds what a 2026-07-28 client expects on every result: the
// result type ("complete", unless the handler set one), for the results
// the proxy writes itself the server's identity in _meta (an upstream's
// result keeps its own _meta as it was), and for lists and reads that
// they are not to be cached.
func (p *Proxy) decorate(next handler) handler {
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		res, werr := next(ctx, r)
		if !r.modern || r.decorated || (werr != nil && werr.input == nil) {
			return res, werr
		}
		if werr != nil {
			werr.input = p.decorateResult(r.method, werr.input)
			return res, werr
		}
		return p.decorateResult(r.method, res), nil
	}
}

func (p *Proxy) decorateResult(method string, res json.RawMessage) json.RawMessage {
	if len(res) == 0 || res[0] != '{' {
		res = json.RawMessage(`{}`)
	}
	// One read of the members and one copy: a list's result is the
	// proxy's largest (about 0.8 MB for 2,000 tools).
	ms, err := rawjson.Members(res)
	if err != nil {
		return res
	}
	var meta []byte
	hasType := false
	for _, m := range ms {
		switch {
		case m.Key == "_meta" && meta == nil:
			meta = res[m.ValueStart:m.ValueEnd]
		case m.Key == "resultType":
			hasType = true
		}
	}
	var set []rawjson.KV
	if ownResults[method] {
		if len(meta) == 0 || meta[0] != '{' {
			meta = []byte(`{}`)
		}
		if m, err := rawjson.Set(meta, metaServerInfo, p.serverInfo()); err == nil {
			set = append(set, rawjson.KV{Key: "_meta", Value: m})
		}
	}
	if !hasType {
		set = append(set, rawjson.KV{Key: "resultType", Value: []byte(`"complete"`)})
	}
	if cachedMethods[method] {
		set = append(set, rawjson.KV{Key: "ttlMs", Value: []byte(`0`)}, rawjson.KV{Key: "cacheScope", Value: []byte(`"private"`)})
	}
	if len(set) == 0 {
		return res
	}
	out, err := rawjson.SetMany(res, set...)
	if err != nil {
		return res
	}
	return out
}

// initialize answers the handshake of a session-based client: the version
// it asked for when the proxy serves it, else the default or the latest
// (docs/protocol.md#downstream-protocol); the proxy's capabilities; and the session's instructions
// (deferred tools, pinned resources), for which it waits for the upstreams
// (at most startup_wait). A second initialize on the same session starts
// it over.
func (p *Proxy) initialize(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	var in struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if len(r.params) > 0 && json.Unmarshal(r.params, &in) != nil {
		return nil, errorf(codeInvalidParams, "invalid initialize params")
	}
	version := in.ProtocolVersion
	switch {
	case version == "":
		version = defaultSessionVersion
	case isModern(version) || !slices.Contains(protocolVersions, version):
		version = latestSessionVersion
	}
	first := r.sess.client.Swap(&clientInfo{version: version, caps: parseCaps(in.Capabilities)}) == nil
	r.sess.open.Store(true)
	if first {
		p.askPendingLogins(r.sess) // the questions go once notifications/initialized has come
	}
	out := []byte(`{"protocolVersion":` + string(rawjson.String(version)) + `,"capabilities":` + capabilitiesJSON +
		`,"serverInfo":` + string(p.serverInfo()))
	if p.needsInstructions(r.sess) {
		p.waitStartup(ctx)
		if instr := p.sessionInstructions(ctx, r.sess); instr != "" {
			out = append(append(out, `,"instructions":`...), rawjson.String(instr)...)
		}
	}
	return append(out, '}'), nil
}

// discover answers a stateless client's server/discover: the versions the
// proxy serves, its capabilities, identity (decorate adds it to _meta) and
// the instructions initialize would give.
func (p *Proxy) discover(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	r.sess.open.Store(true) // on stdio the connection now takes notifications
	versions, _ := json.Marshal(protocolVersions)
	out := []byte(`{"supportedVersions":` + string(versions) + `,"capabilities":` + capabilitiesJSON)
	if p.needsInstructions(r.sess) {
		p.waitStartup(ctx)
		if instr := p.sessionInstructions(ctx, r.sess); instr != "" {
			out = append(append(out, `,"instructions":`...), rawjson.String(instr)...)
		}
	}
	return append(out, '}'), nil
}

func (p *Proxy) ping(context.Context, *request) (json.RawMessage, *wireError) {
	return json.RawMessage(`{}`), nil
}

// setLevel sets the session's log level, which filters the upstream log
// messages it receives, and passes the most verbose level of the sessions
// granted each server on to that server (docs/protocol.md#requests-from-servers).
func (p *Proxy) setLevel(_ context.Context, r *request) (json.RawMessage, *wireError) {
	level, err := stringMember(r.params, "level")
	i := levelIndex(level)
	if err != nil || i < 0 {
		return nil, errorf(codeInvalidParams, "invalid logging level %q", truncate(level, 40))
	}
	r.sess.level.Store(i)
	p.applyLogLevels()
	return json.RawMessage(`{}`), nil
}

// notified handles a client notification. Unknown ones are ignored, as
// JSON-RPC asks.
func (p *Proxy) notified(s *session, m rawjson.Message) {
	switch m.Method {
	case "notifications/initialized":
		s.markInitialized() // the proxy's requests to the client were waiting for it (session.ask)
	case "notifications/cancelled":
		if id, ok, _ := rawjson.Get(m.Params, "requestId"); ok && !rawjson.IsNull(id) {
			s.inflight.cancel(id)
		}
	case "notifications/roots/list_changed":
		p.rootsChanged(s)
	}
}
