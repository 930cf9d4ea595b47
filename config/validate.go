package config

import (
	"errors"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
	"github.com/rs/zerolog"
)

// Allowed values of the enumerated fields.
var (
	namingStyles     = []string{"zeroclaw", "hermes"}
	listenTransports = []string{"stdio", "http"}
	serverTransports = []string{TransportStdio, TransportHTTP, TransportSSE}
	// protocols the proxy can offer upstream; "auto" (the default) asks the
	// stateless 2026-07-28 server/discover first (docs/protocol.md#upstream-protocol).
	protocols     = []string{LatestProtocol, LatestSessionProtocol, "2025-06-18", "2025-03-26", "2024-11-05", ProtocolAuto}
	blobModes     = []string{"file", "passthrough"}
	logFormats    = []string{"json", "console"}
	autonomyModes = []string{"full", "supervised", "read_only"}
	groupModes    = []string{"always", "dynamic"}
	logLevels     = []string{
		zerolog.TraceLevel.String(), zerolog.DebugLevel.String(), zerolog.InfoLevel.String(),
		zerolog.WarnLevel.String(), zerolog.ErrorLevel.String(), zerolog.FatalLevel.String(),
		zerolog.PanicLevel.String(), zerolog.Disabled.String(),
	}
	// reservedPaths answer on the HTTP listener besides the MCP endpoint.
	reservedPaths = []string{"/healthz", "/readyz"}
)

// maxNameLen is the longest server or agent name (seed): it keeps exposed
// tool names within the 64 characters model APIs accept.
const maxNameLen = 32

// validator collects problems.
type validator struct {
	problems []error
	dropped  map[string]bool // see docInfo.dropped
}

// droppedAt reports whether path, or a key path it lies under, was dropped
// from the document.
func (v *validator) droppedAt(path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if v.dropped[p] {
			return true
		}
	}
	return false
}

// droppedItem reports whether the list at path lost an item: a rule about
// the list as a whole ("tokens: required") would judge what is left.
func (v *validator) droppedItem(path string) bool {
	for p := range v.dropped {
		if strings.HasPrefix(p, path+"[") {
			return true
		}
	}
	return false
}

// droppedUnder reports whether path or anything under it was dropped: the
// object lost a key or a value, so rules about which keys it has do not
// apply ("needs command or url" when url was ${UNSET}).
func (v *validator) droppedUnder(path string) bool {
	for p := range v.dropped {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			return true
		}
	}
	return false
}

// parentPath is the path one key or index up: "a.b[2]" → "a.b",
// "a.b" → "a", "a" → "". Quoted keys ("servers.\"a.b\"") are kept whole.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if strings.HasSuffix(p, `"`) {
		if i := strings.LastIndex(p[:len(p)-1], `."`); i >= 0 {
			return p[:i]
		}
		return ""
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

func (v *validator) add(path, msg string) { v.problems = append(v.problems, problem(path, msg)) }

// oneOf checks an enumerated value and names the choices.
func (v *validator) oneOf(path, got string, allowed []string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	v.add(path, "must be "+orList(allowed)+", got "+quoteValue(got))
}

// Validate checks every rule that can be checked without the network or
// the file system, and returns the problems joined with errors.Join, each a
// *FieldError prefixed by its key path, sorted by path; nil when c is
// valid. It expects defaults to be applied, as Parse does. Its texts never
// contain a secret value.
func (c *Config) Validate() error {
	return joinProblems(c.problems(), c.Secrets())
}

// problems runs every rule and returns the problems sorted by path, except
// those at or under a path Parse dropped (see docInfo.dropped).
func (c *Config) problems() []error {
	v := &validator{dropped: c.doc.dropped}
	c.validateTop(v)
	c.validateListen(v)
	c.validateListenAuth(v)
	c.validateServers(v)
	c.validateReconnect(v)
	c.validateAgents(v)
	c.validateAuth(v)
	c.validateBlobs(v)
	c.validateMetrics(v)
	c.validateStatus(v)
	c.validateIntegrity(v)
	c.validateTracing(v)
	c.validateRegistry(v)
	c.validateAudit(v)
	c.validateOverrides(v)
	c.validateLimits(v)
	c.validateStore(v)
	kept := v.problems[:0]
	for _, p := range v.problems {
		if path := problemPath(p); !v.droppedAt(path) && !v.droppedItem(path) {
			kept = append(kept, p)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool {
		return problemPath(kept[i]) < problemPath(kept[j])
	})
	return kept
}

func problemPath(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return ""
}

func (c *Config) validateTop(v *validator) {
	v.oneOf("naming", c.Naming, namingStyles)
	if c.UntrustedTextLimit <= 0 {
		v.add("untrusted_text_limit", "must be greater than 0")
	}
	if c.StartupWait < 0 {
		v.add("startup_wait", "must not be negative")
	}
	v.oneOf("blobs.mode", c.Blobs.Mode, blobModes)
	switch dir := c.Blobs.Dir; {
	case dir == "":
		if c.Blobs.Mode == "file" {
			v.add("blobs.dir", "no default directory could be found: set blobs.dir, $XDG_STATE_HOME or $HOME")
		}
	case strings.HasPrefix(dir, "~"):
		v.add("blobs.dir", `"~" is not expanded: write ${HOME} instead`)
	case !filepath.IsAbs(dir):
		v.add("blobs.dir", "must be an absolute path, got "+quoteValue(dir))
	}
	v.oneOf("log.level", c.Log.Level, logLevels)
	v.oneOf("log.format", c.Log.Format, logFormats)
	if c.HasAgents() {
		if c.DefaultAgent != "" && c.Agents[c.DefaultAgent] == nil {
			v.add("default_agent", "no agent named "+quoteValue(c.DefaultAgent)+" (agents: "+strings.Join(c.AgentNames(), ", ")+")")
		}
	} else if c.DefaultAgent != "" && c.DefaultAgent != ImplicitAgent {
		v.add("default_agent", "no agents are defined, so the only agent is "+strconv.Quote(ImplicitAgent)+", got "+quoteValue(c.DefaultAgent))
	}
}

func (c *Config) validateListen(v *validator) {
	v.oneOf("listen.transport", c.Listen.Transport, listenTransports)
	host, addrOK := checkAddr(v, "listen.addr", c.Listen.Addr)
	checkHTTPPath(v, "listen.path", c.Listen.Path)
	if strings.HasPrefix(c.Listen.Path, "/agents/") {
		v.add("listen.path", `must not be under /agents/, where each agent has its own endpoint`)
	}
	if c.Metrics.Listen != "" {
		checkAddr(v, "metrics.listen", c.Metrics.Listen)
	}
	checkHTTPPath(v, "metrics.path", c.Metrics.Path)

	// docs/agents.md#over-http: a listener others can reach must authenticate every agent.
	if c.Listen.Transport != "http" || !addrOK || httpguard.IsLoopback(host) {
		return
	}
	// Under listen.auth (docs/security.md#oauth-on-the-http-listener) match rules count as credentials too.
	if !c.HasAgents() {
		if c.Listen.Auth != nil {
			return // validateListenAuth reports that no agent can be reached
		}
		v.add("listen.addr", quoteValue(c.Listen.Addr)+" is not a loopback address, so every agent needs tokens, "+
			"and the implicit agent "+strconv.Quote(ImplicitAgent)+" has none: define agents with tokens, or listen on 127.0.0.1")
		return
	}
	for _, name := range c.AgentNames() {
		switch a := c.Agents[name]; {
		case c.hasHTTPCredentials(a):
		case c.Listen.Auth != nil:
			v.add(joinPath("agents", pathKey(name)),
				"needs tokens or match because listen.addr "+quoteValue(c.Listen.Addr)+" is not a loopback address")
		default:
			v.add(joinPath(joinPath("agents", pathKey(name)), "tokens"),
				"required because listen.addr "+quoteValue(c.Listen.Addr)+" is not a loopback address")
		}
	}
}

// checkAddr checks a host:port listen address and returns its host.
func checkAddr(v *validator, path, addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(path, "must be host:port, got "+quoteValue(addr))
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 || !isDigits(port) {
		v.add(path, "port must be a number from 0 to 65535, got "+quoteValue(port))
		return "", false
	}
	return host, true
}

// checkHTTPPath checks an endpoint path of an HTTP listener.
func checkHTTPPath(v *validator, path, p string) {
	switch {
	case !strings.HasPrefix(p, "/"):
		v.add(path, `must start with "/", got `+quoteValue(p))
	case strings.ContainsAny(p, "?# \t\r\n"):
		v.add(path, "must be a plain URL path (no query, fragment or spaces), got "+quoteValue(p))
	default:
		for _, r := range reservedPaths {
			if p == r {
				v.add(path, "must not be "+r+", which the proxy serves itself")
			}
		}
	}
}

// checkName applies the server-name rule (seed) to a server or agent name.
// checkNames checks the names of a section's map (sorted), each with
// checkName and against the names before it, which it must not equal
// ignoring case. It then calls each with the name's path and whether it is
// unique in that sense.
func checkNames(v *validator, section, kind string, names []string, each func(path, name string, unique bool)) {
	byFold := make(map[string]string, len(names)) // lowercased name -> first name
	for _, name := range names {
		path := joinPath(section, pathKey(name))
		checkName(v, path, kind, name)
		first, dup := byFold[strings.ToLower(name)]
		if dup {
			v.add(path, kind+" name conflicts with "+strconv.Quote(first)+" (names are compared ignoring case)")
		} else {
			byFold[strings.ToLower(name)] = name
		}
		each(path, name, !dup)
	}
}

func checkName(v *validator, path, kind, name string) {
	switch {
	case name == "":
		v.add(path, kind+" name must not be empty")
	case len(name) > maxNameLen:
		v.add(path, kind+" name is longer than "+strconv.Itoa(maxNameLen)+" characters")
	case !validNameChars(name):
		v.add(path, kind+` name may only contain letters, digits, "_" and "-"`)
	case strings.Contains(name, "__"):
		v.add(path, kind+` name must not contain "__", which separates server and tool names`)
	}
}

func validNameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// orList writes "a, b or c".
func orList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
