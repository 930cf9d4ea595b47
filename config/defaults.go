package config

import (
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"
)

// Defaults. Values marked (seed) are those of the agent runtimes the
// proxy's behaviour comes from (docs/configuration.md); keep them.
const (
	// DefaultNaming is the seed's own style, <server>__<tool>.
	DefaultNaming = "zeroclaw"
	// DefaultStartupWait lets typical subprocess servers (npx, uvx) finish
	// starting before a session's first tools/list, without keeping a
	// host that times out its first request waiting too long.
	DefaultStartupWait = 10 * time.Second
	// DefaultUntrustedTextLimit keeps real documents readable through the
	// built-in tools (the seed's 500 chars did not) while bounding context.
	DefaultUntrustedTextLimit = 100000
	// DefaultListenTransport is stdio: hosts start MCP servers as children.
	DefaultListenTransport = "stdio"
	// DefaultListenAddr is loopback, so nothing reaches the network unless
	// the operator asks for it.
	DefaultListenAddr = "127.0.0.1:8080"
	// DefaultListenPath is the endpoint path the MCP transport spec uses.
	DefaultListenPath = "/mcp"
	// DefaultSessionIdleTimeout closes an HTTP session nobody has used for
	// that long: clients that end without DELETE (most do) would otherwise
	// be held, and counted as active, for the life of the process.
	DefaultSessionIdleTimeout = 30 * time.Minute
	// DefaultListenAuthType is the only type of listen.auth (docs/security.md#oauth-on-the-http-listener).
	DefaultListenAuthType = "oauth"
	// DefaultMetricsPath is the Prometheus convention.
	DefaultMetricsPath = "/metrics"
	// DefaultBlobsMode writes embedded blobs to files (seed behaviour).
	DefaultBlobsMode = "file"
	// DefaultBlobsMaxBytes bounds each agent's blob folder (docs/resources.md#blobs), so an
	// upstream returning 10 MiB a call cannot fill the disk.
	DefaultBlobsMaxBytes = 1 << 30
	// DefaultBlobsMaxAge keeps blob files a week after their last use (docs/resources.md#blobs).
	DefaultBlobsMaxAge = 168 * time.Hour
	// DefaultLogLevel and DefaultLogFormat suit a service whose logs are
	// collected by a machine.
	DefaultLogLevel  = "info"
	DefaultLogFormat = "json"

	// DefaultTimeout bounds one tool call or resource/prompt request (seed).
	DefaultTimeout = 120 * time.Second
	// MaxTimeout is the largest allowed timeout (seed cap).
	MaxTimeout = 600 * time.Second
	// DefaultConnectTimeout bounds connect + initialize + first discovery
	// (seed).
	DefaultConnectTimeout = 60 * time.Second
	// DefaultProtocol lets the proxy find each server's protocol era:
	// server/discover first (the 2026-07-28 core), initialize when the server
	// predates it (docs/protocol.md#upstream-protocol).
	DefaultProtocol = ProtocolAuto
	// ProtocolAuto is the protocol setting that finds the server's era.
	ProtocolAuto = "auto"
	// LatestSessionProtocol is the newest MCP version with the initialize
	// handshake and sessions, which every current server speaks.
	LatestSessionProtocol = "2025-11-25"
	// LatestProtocol is the newest MCP version the proxy speaks upstream:
	// the stateless core, without initialize.
	LatestProtocol = "2026-07-28"
	// DefaultMaxResponseBytes is the base64 size of the 10 MiB decoded blob
	// budget plus room for the JSON-RPC envelope (seed), so a result with a
	// valid near-limit blob still arrives.
	DefaultMaxResponseBytes = 16078168
	// DefaultReconnectWait is how long after a dropped connection requests
	// wait for the reconnection instead of failing (docs/operations.md#reconnection): the first
	// reconnect attempt starts after about 1 s, so a server that restarts
	// at once is back well within it.
	DefaultReconnectWait = 5 * time.Second
	// DefaultKeepalive pings often enough to notice a dead connection
	// before the next call needs it, rarely enough to cost nothing.
	DefaultKeepalive = 180 * time.Second

	// Sampling governance defaults (seed, docs/protocol.md#requests-from-servers).
	DefaultSamplingMaxRPM       = 10
	DefaultSamplingMaxTokensCap = 4096
	DefaultSamplingTimeout      = 30 * time.Second

	// DefaultPinning keeps existing setups working: a changed tool is
	// logged and counted, not held (docs/security.md#tool-integrity; the README recommends
	// quarantine).
	DefaultPinning = "warn"
	// DefaultNewTools serves tools that appear after a server was pinned
	// (and pins them).
	DefaultNewTools = "allow"
	// DefaultScan logs and counts description findings without changing
	// what clients see.
	DefaultScan = "warn"

	// DefaultAutonomy is the seed's default: no approval prompts.
	DefaultAutonomy = "full"
	// ImplicitAgent is the agent served when the config has no agents.
	ImplicitAgent = "default"
)

// Transports of an upstream server (Server.Transport).
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
)

// applyDefaults fills every unset field. A key the document set explicitly
// keeps its value even when it is zero (Validate then judges it); lookupEnv
// resolves the default blobs directory.
func (c *Config) applyDefaults(lookupEnv func(string) (string, bool)) {
	if c.Enabled == nil {
		c.Enabled = boolPtr(true)
	}
	if c.Naming == "" {
		c.Naming = DefaultNaming
	}
	if c.DeferredCallTool == nil {
		c.DeferredCallTool = boolPtr(true)
	}
	if c.StartupWait == 0 && !c.isSet("startup_wait") {
		c.StartupWait = Duration(DefaultStartupWait)
	}
	if c.UntrustedTextLimit == 0 && !c.isSet("untrusted_text_limit") {
		c.UntrustedTextLimit = DefaultUntrustedTextLimit
	}
	setString(&c.Listen.Transport, DefaultListenTransport)
	setString(&c.Listen.Addr, DefaultListenAddr)
	setString(&c.Listen.Path, DefaultListenPath)
	if c.Listen.Auth != nil {
		setString(&c.Listen.Auth.Type, DefaultListenAuthType)
	}
	setString(&c.Metrics.Path, DefaultMetricsPath)
	setString(&c.Blobs.Mode, DefaultBlobsMode)
	if c.Blobs.Dir == "" {
		c.Blobs.Dir = defaultBlobsDir(lookupEnv)
	}
	if c.Blobs.MaxBytes == 0 && !c.isSet("blobs.max_bytes") {
		c.Blobs.MaxBytes = DefaultBlobsMaxBytes
	}
	c.durationDefault(&c.Blobs.MaxAge, "blobs.max_age", DefaultBlobsMaxAge)
	if c.StateDir == "" {
		c.StateDir = defaultStateDir(lookupEnv)
	}
	setString(&c.Pinning, DefaultPinning)
	setString(&c.NewTools, DefaultNewTools)
	setString(&c.Scan, DefaultScan)
	setString(&c.Log.Level, DefaultLogLevel)
	setString(&c.Log.Format, DefaultLogFormat)
	c.tracingDefaults(lookupEnv)
	c.auditDefaults()
	c.storeDefaults()
	for name, s := range c.Servers {
		if s != nil {
			c.serverDefaults(joinPath("servers", pathKey(name)), s)
		}
	}
	for name, a := range c.Agents {
		if a == nil {
			continue
		}
		setString(&a.Autonomy, DefaultAutonomy)
		for i := range a.Limits {
			// A bucket holds per_minute calls unless burst says otherwise
			// (docs/agents.md#overrides-and-rate-limits).
			l := &a.Limits[i]
			if l.Burst == 0 && !c.isSet(indexPath(joinPath("agents", pathKey(name))+".limits", i)+".burst") {
				l.Burst = l.PerMinute
			}
		}
	}
}

// PublicURLFor is the URL clients use for the HTTP listener (docs/security.md#oauth-on-the-http-listener):
// listen.public_url without a trailing "/", else http://<addr>. addr is
// boundAddr when it is not empty, else listen.addr. The default is computed
// here rather than stored by applyDefaults because the address is only known
// for sure once the listener is bound: --listen replaces listen.addr after
// loading, and port 0 picks a free port.
func (l Listen) PublicURLFor(boundAddr string) string {
	if l.PublicURL != "" {
		return strings.TrimSuffix(l.PublicURL, "/")
	}
	if boundAddr == "" {
		boundAddr = l.Addr
	}
	return "http://" + boundAddr
}

func (c *Config) serverDefaults(path string, s *Server) {
	if s.Transport == "" {
		switch {
		case s.Command != "" && s.URL == "":
			s.Transport = TransportStdio
		case s.URL != "" && s.Command == "":
			s.Transport = TransportHTTP
		}
	}
	c.durationDefault(&s.Timeout, path+".timeout", DefaultTimeout)
	c.durationDefault(&s.ConnectTimeout, path+".connect_timeout", DefaultConnectTimeout)
	c.durationDefault(&s.Keepalive, path+".keepalive", DefaultKeepalive)
	if s.ReconnectWait == nil {
		d := Duration(DefaultReconnectWait)
		s.ReconnectWait = &d
	}
	if s.Enabled == nil {
		s.Enabled = boolPtr(true)
	}
	setString(&s.Protocol, DefaultProtocol)
	// The top-level integrity keys are the default of every server's.
	setString(&s.Pinning, c.Pinning)
	setString(&s.NewTools, c.NewTools)
	setString(&s.Scan, c.Scan)
	if s.Tools.Resources == nil {
		s.Tools.Resources = boolPtr(true)
	}
	if s.Tools.Prompts == nil {
		s.Tools.Prompts = boolPtr(true)
	}
	if s.MaxResponseBytes == 0 {
		s.MaxResponseBytes = DefaultMaxResponseBytes
	}
	sp := path + ".sampling"
	if s.Sampling.Enabled == nil {
		s.Sampling.Enabled = boolPtr(true)
	}
	if s.Sampling.MaxRPM == 0 && !c.isSet(sp+".max_rpm") {
		s.Sampling.MaxRPM = DefaultSamplingMaxRPM
	}
	if s.Sampling.MaxTokensCap == 0 && !c.isSet(sp+".max_tokens_cap") {
		s.Sampling.MaxTokensCap = DefaultSamplingMaxTokensCap
	}
	c.durationDefault(&s.Sampling.Timeout, sp+".timeout", DefaultSamplingTimeout)
}

func (c *Config) durationDefault(d *Duration, path string, def time.Duration) {
	if *d == 0 && !c.isSet(path) {
		*d = Duration(def)
	}
}

func setString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func boolPtr(b bool) *bool { return &b }

// defaultBlobsDir is $XDG_STATE_HOME/mcp-proxy/blobs, else
// ~/.local/state/mcp-proxy/blobs; "" when neither can be found.
func defaultBlobsDir(lookupEnv func(string) (string, bool)) string {
	dir := defaultStateDir(lookupEnv)
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "blobs")
}

// defaultStateDir is $XDG_STATE_HOME/mcp-proxy, else
// ~/.local/state/mcp-proxy; "" when neither can be found. A relative
// $XDG_STATE_HOME is ignored, as the XDG spec says.
func defaultStateDir(lookupEnv func(string) (string, bool)) string {
	if v, ok := lookupEnv("XDG_STATE_HOME"); ok && filepath.IsAbs(v) {
		return filepath.Join(v, "mcp-proxy")
	}
	home := homeDir(lookupEnv)
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "mcp-proxy")
}

// homeDir is the home directory that lookupEnv names ($HOME; on Windows
// %USERPROFILE%), else "". It never asks the process environment past
// lookupEnv: a caller that hides HOME (a test) must not get the real home.
func homeDir(lookupEnv func(string) (string, bool)) string {
	key := "HOME"
	if goruntime.GOOS == "windows" {
		key = "USERPROFILE"
	}
	if v, ok := lookupEnv(key); ok && v != "" {
		return v
	}
	return ""
}
