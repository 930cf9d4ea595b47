package downstream

import (
	"context"
	"encoding/json"
	"slices"

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

// capabilitiesJSON is what the proxy offers every client: tools, resources
// (with subscriptions) and prompts that change, logging and completions.
const capabilitiesJSON = `{"logging":{},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true},"completions":{}}`

// lifecycle answers the requests that begin and tend a session: the
// handshake (initialize, or a stateless client's server/discover), ping,
// and logging/setLevel.
type lifecycle struct {
	serverInfo []byte // the proxy's serverInfo object (env.serverInfo)
	catalog    catalogWait
	own        instructor
	logins     pendingLogins
	levels     levelApplier
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
	out := []byte(`{"protocolVersion":` + string(rawjson.String(version)) + `,"capabilities":` + capabilitiesJSON +
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
	out := []byte(`{"supportedVersions":` + string(versions) + `,"capabilities":` + capabilitiesJSON)
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
