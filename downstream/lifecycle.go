package downstream

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
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

// firstCompletionsVersion is the first protocol version that has the
// completions capability (MCP 2025-03-26); a 2024-11-05 client is not
// offered it.
const firstCompletionsVersion = "2025-03-26"

// offered is what the proxy offers one client: the union of what the
// servers its agent is granted offer, and tools always (the proxy's own
// tools, and lists that change as servers come and go).
type offered struct {
	logging, prompts, resources, subscribe, completions bool
	// tasks unites the servers' tasks capabilities (tasks.go).
	tasks upstream.TaskCapabilities
}

// offeredTo is the union over the servers s's agent is granted. A server
// that is not connected (still making its first connection, or down)
// counts as offering everything: it may come with any of it, and a
// capability is offered once, at the handshake. Prompts and resources
// count only where the server's config lets them through
// (docs/resources.md#resources-and-prompts).
func (lc *lifecycle) offeredTo(s *session) offered {
	var o offered
	g := lc.gen()
	for _, name := range g.serverNames() {
		cfg := g.cfg.Servers[name]
		if cfg == nil || !s.agent.Granted(name) {
			continue
		}
		snap := g.ups[name].Snapshot()
		c := snap.Capabilities
		if !snap.Listed() {
			c = upstream.Capabilities{Resources: true, ResourcesSubscribe: true, Prompts: true, Logging: true, Completions: true,
				Tasks: upstream.TaskCapabilities{ToolCalls: true, List: true, Cancel: true}}
		}
		o.logging = o.logging || c.Logging
		o.prompts = o.prompts || c.Prompts && cfg.PromptsEnabled()
		o.resources = o.resources || c.Resources && cfg.ResourcesEnabled()
		o.subscribe = o.subscribe || c.Resources && c.ResourcesSubscribe && cfg.ResourcesEnabled()
		o.completions = o.completions || c.Completions
		o.tasks.ToolCalls = o.tasks.ToolCalls || c.Tasks.ToolCalls
		o.tasks.List = o.tasks.List || c.Tasks.List
		o.tasks.Cancel = o.tasks.Cancel || c.Tasks.Cancel
	}
	return o
}

// capabilitiesJSON is o as the capabilities object of protocol version
// version: what that version cannot express is left out.
func (o offered) capabilitiesJSON(version string) []byte {
	out := append(make([]byte, 0, 160), '{')
	if o.logging {
		out = append(out, `"logging":{},`...)
	}
	if o.prompts {
		out = append(out, `"prompts":{"listChanged":true},`...)
	}
	switch {
	case o.resources && o.subscribe:
		out = append(out, `"resources":{"subscribe":true,"listChanged":true},`...)
	case o.resources:
		out = append(out, `"resources":{"listChanged":true},`...)
	}
	out = append(out, `"tools":{"listChanged":true}`...)
	if o.completions && version >= firstCompletionsVersion {
		out = append(out, `,"completions":{}`...)
	}
	if o.tasks.Any() && version >= firstTasksVersion && !isModern(version) {
		out = append(out, `,"tasks":{`...)
		sep := ""
		if o.tasks.List {
			out, sep = append(out, `"list":{}`...), ","
		}
		if o.tasks.Cancel {
			out, sep = append(append(out, sep...), `"cancel":{}`...), ","
		}
		if o.tasks.ToolCalls {
			out = append(append(out, sep...), `"requests":{"tools":{"call":{}}}`...)
		}
		out = append(out, '}')
	}
	return append(out, '}')
}

// lifecycle answers the requests that begin and tend a session: the
// handshake (initialize, or a stateless client's server/discover), ping,
// and logging/setLevel.
type lifecycle struct {
	generations        // the servers offeredTo unites
	serverInfo  []byte // the proxy's serverInfo object (env.serverInfo)
	catalog     catalogWait
	own         instructor
	logins      pendingLogins
	levels      levelApplier
}

// instructor renders the session instructions of the own tools.
type instructor interface {
	needsInstructions(s *session) bool
	sessionInstructions(ctx context.Context, r *request) string
}

// pendingLogins asks a client that just initialized about the OAuth
// logins waiting for it.
type pendingLogins interface {
	askPendingLogins(s *session)
}

// levelApplier passes the sessions' log levels on to the upstreams.
type levelApplier interface {
	applyLogLevels()
}

// initialize answers the handshake of a session-based client: the version
// it asked for when the proxy serves it, else the default or the latest
// (docs/protocol.md#downstream-protocol); the proxy's capabilities; and the session's instructions
// (deferred tools, pinned resources), for which it waits for the upstreams
// (at most startup_wait). A second initialize on the same session starts
// it over.
func (lc *lifecycle) initialize(ctx context.Context, r *request) (json.RawMessage, *wireError) {
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
	first := r.sess.state.SetClient(clientInfo{version: version, caps: parseCaps(in.Capabilities)})
	r.sess.open.Store(true)
	if first {
		lc.logins.askPendingLogins(r.sess) // the questions go once notifications/initialized has come
	}
	out := []byte(`{"protocolVersion":` + string(rawjson.String(version)) + `,"capabilities":` + string(lc.offeredTo(r.sess).capabilitiesJSON(version)) +
		`,"serverInfo":` + string(lc.serverInfo))
	if lc.own.needsInstructions(r.sess) {
		lc.catalog.waitStartup(ctx)
		if instr := lc.own.sessionInstructions(ctx, r); instr != "" {
			out = append(append(out, `,"instructions":`...), rawjson.String(instr)...)
		}
	}
	return append(out, '}'), nil
}

// discover answers a stateless client's server/discover: the versions the
// proxy serves, its capabilities, identity (decorate adds it to _meta) and
// the instructions initialize would give.
func (lc *lifecycle) discover(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	r.sess.open.Store(true) // on stdio the connection now takes notifications
	versions, _ := json.Marshal(protocolVersions)
	out := []byte(`{"supportedVersions":` + string(versions) + `,"capabilities":` + string(lc.offeredTo(r.sess).capabilitiesJSON(r.version)))
	if lc.own.needsInstructions(r.sess) {
		lc.catalog.waitStartup(ctx)
		if instr := lc.own.sessionInstructions(ctx, r); instr != "" {
			out = append(append(out, `,"instructions":`...), rawjson.String(instr)...)
		}
	}
	return append(out, '}'), nil
}

func (lc *lifecycle) ping(context.Context, *request) (json.RawMessage, *wireError) {
	return json.RawMessage(`{}`), nil
}

// setLevel sets the session's log level, which filters the upstream log
// messages it receives, and passes the most verbose level of the sessions
// granted each server on to that server (docs/protocol.md#requests-from-servers).
func (lc *lifecycle) setLevel(_ context.Context, r *request) (json.RawMessage, *wireError) {
	level, err := stringMember(r.params, "level")
	i := levelIndex(level)
	if err != nil || i < 0 {
		return nil, errorf(codeInvalidParams, "invalid logging level %q", truncate(level, 40))
	}
	r.sess.state.SetLevel(i)
	lc.levels.applyLogLevels()
	return json.RawMessage(`{}`), nil
}
