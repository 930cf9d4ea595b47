package config

import "time"

// Config is the whole mcp-proxy configuration file (docs/configuration.md). It is decoded
// strictly from YAML: a key that is not a field here is a load error.
type Config struct {
	// Enabled false connects to no upstream but keeps the definitions.
	Enabled *bool `yaml:"enabled"`
	// Naming is "zeroclaw" (<server>__<tool>) or "hermes" (mcp_<server>_<tool>).
	Naming string `yaml:"naming"`
	// DeferredLoading hides tool schemas behind tool_search (docs/deferred-loading.md).
	DeferredLoading bool `yaml:"deferred_loading"`
	// DeferredCallTool lists call_tool in deferred mode.
	DeferredCallTool *bool `yaml:"deferred_call_tool"`
	// StartupWait bounds how long a session's first tools/list waits.
	StartupWait Duration `yaml:"startup_wait"`
	// UntrustedTextLimit cuts resource/prompt text through the built-in tools.
	UntrustedTextLimit int `yaml:"untrusted_text_limit"`

	Servers      map[string]*Server `yaml:"servers"`
	Bundles      map[string]*Bundle `yaml:"bundles"`
	Agents       map[string]*Agent  `yaml:"agents"`
	DefaultAgent string             `yaml:"default_agent"`

	Listen  Listen  `yaml:"listen"`
	Metrics Metrics `yaml:"metrics"`
	Blobs   Blobs   `yaml:"blobs"`
	Log     Log     `yaml:"log"`

	// StateDir holds what must survive a restart: tool pins (docs/security.md#tool-integrity) and
	// OAuth tokens and registrations (docs/security.md#oauth-upstreams).
	StateDir string `yaml:"state_dir"`
	// Pinning, NewTools and Scan are the defaults of the server fields of
	// the same names (docs/security.md#tool-integrity).
	Pinning  string `yaml:"pinning"`
	NewTools string `yaml:"new_tools"`
	Scan     string `yaml:"scan"`
	// Tracing exports OpenTelemetry traces (docs/operations.md#traces).
	Tracing Tracing `yaml:"tracing"`
	// Audit writes one JSON line per decision (docs/operations.md#audit-log).
	Audit Audit `yaml:"audit"`
	// Store is where state shared by replicas lives (docs/shared-state.md).
	Store Store `yaml:"store"`
	// Registry is the MCP Registry that `mcp-proxy registry search` and
	// `mcp-proxy add` read (docs/configuration.md#adding-a-server-from-the-registry).
	Registry Registry `yaml:"registry"`

	// doc is what Parse learned from the document itself.
	doc docInfo
}

// docInfo is what Parse learned from the document beyond the decoded
// values.
type docInfo struct {
	// present holds the key path of every key the document gave a non-null
	// value. Defaults use it to tell an explicit zero (keepalive: 0 turns
	// pings off) from an absent key.
	present map[string]bool
	// secretVars are the values of environment variables referenced inside
	// secret values ("Bearer ${TOKEN}"): secrets of their own.
	secretVars []string
	// dropped holds the paths of keys and values Parse cut out of the
	// document because they were reported already (unknown keys, wrong
	// kinds, unset variables); Validate judges nothing at or under them.
	dropped map[string]bool
	// agentOrder lists the agents in the order the document writes them
	// (see AgentsInOrder).
	agentOrder []string
	// serverOrder lists the servers in the order the document writes them
	// (see ServersInOrder).
	serverOrder []string
}

// Server is one upstream MCP server (docs/configuration.md#servers).
type Server struct {
	// Name is the key of the servers map; filled in by Load, never decoded.
	Name string `yaml:"-"`

	Transport  string            `yaml:"transport"`
	Command    string            `yaml:"command"`
	Args       []string          `yaml:"args"`
	Cwd        string            `yaml:"cwd"`
	Env        map[string]string `yaml:"env"`
	InheritEnv bool              `yaml:"inherit_env"`
	URL        string            `yaml:"url"`
	Headers    map[string]string `yaml:"headers"`

	Timeout        Duration `yaml:"timeout"`
	ConnectTimeout Duration `yaml:"connect_timeout"`
	Enabled        *bool    `yaml:"enabled"`
	// Prefix nil means the server name; a pointer to "" exposes bare names.
	Prefix   *string `yaml:"prefix"`
	Protocol string  `yaml:"protocol"`
	Required bool    `yaml:"required"`

	Tools           ToolFilter `yaml:"tools"`
	PinnedResources []string   `yaml:"pinned_resources"`
	TLSCACertPath   string     `yaml:"tls_ca_cert_path"`
	// MaxResponseBytes 0 means the default.
	MaxResponseBytes int64    `yaml:"max_response_bytes"`
	Keepalive        Duration `yaml:"keepalive"`
	Sampling         Sampling `yaml:"sampling"`

	// Auth is how the proxy authorizes itself to an http/sse server
	// (docs/security.md#oauth-upstreams); nil means no authorization beyond Headers.
	Auth *ServerAuth `yaml:"auth"`
	// Pinning, NewTools and Scan govern tool integrity (docs/security.md#tool-integrity); empty
	// means the top-level value.
	Pinning  string `yaml:"pinning"`
	NewTools string `yaml:"new_tools"`
	Scan     string `yaml:"scan"`
	// Limits protect the server from the proxy's clients (docs/agents.md#overrides-and-rate-limits).
	Limits ServerLimits `yaml:"limits"`
	// ReconnectWait is how long after a drop requests wait for the
	// reconnection instead of failing (docs/operations.md#reconnection); nil means the default.
	ReconnectWait *Duration `yaml:"reconnect_wait"`
	// Roots answer the server's roots/list when no client can be asked
	// (docs/configuration.md).
	Roots []Root `yaml:"roots"`
}

// ServerAuth is a server's auth key (docs/security.md#oauth-upstreams). Type is "bearer",
// "oauth" or "client_credentials"; each type uses some of the fields.
type ServerAuth struct {
	Type string `yaml:"type"`
	// Token is the static token of type bearer (a secret).
	Token string `yaml:"token"`
	// ClientID and ClientSecret identify a pre-registered client (oauth,
	// client_credentials); the secret is a secret.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// TokenEndpointAuth is none, client_secret_basic or client_secret_post.
	TokenEndpointAuth string   `yaml:"token_endpoint_auth"`
	Scopes            []string `yaml:"scopes"`
	// ClientMetadataURL is an https URL used as the client id where the
	// authorization server supports Client ID Metadata Documents.
	ClientMetadataURL string `yaml:"client_metadata_url"`
	// RedirectPort is the loopback port of the login callback; 0 picks one.
	RedirectPort int `yaml:"redirect_port"`
	// Open is the command that opens the authorization URL ("none": only
	// print it); empty means the desktop's opener.
	Open string `yaml:"open"`
	// PrivateKeyFile and Alg sign private_key_jwt client assertions
	// (client_credentials).
	PrivateKeyFile string `yaml:"private_key_file"`
	Alg            string `yaml:"alg"`
}

// ServerLimits bound the calls the proxy sends one server (docs/agents.md#overrides-and-rate-limits).
// Zero means no limit.
type ServerLimits struct {
	PerMinute     int `yaml:"per_minute"`
	MaxConcurrent int `yaml:"max_concurrent"`
}

// Root is one entry of a server's configured roots.
type Root struct {
	URI  string `yaml:"uri"`
	Name string `yaml:"name"`
}

// ToolOverride changes how clients see one upstream tool (docs/agents.md#overrides-and-rate-limits).
// Every field is optional; the call still goes to the upstream's tool.
type ToolOverride struct {
	Name        string `yaml:"name"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	// Annotations are merged over the upstream's annotations.
	Annotations map[string]any `yaml:"annotations"`
	// Arguments pins parameters: removed from the exposed schema and
	// injected into every call.
	Arguments map[string]any `yaml:"arguments"`
}

// ToolFilter is a server's own include/exclude lists plus the resource and
// prompt switches.
type ToolFilter struct {
	Include   []string `yaml:"include"`
	Exclude   []string `yaml:"exclude"`
	Resources *bool    `yaml:"resources"`
	Prompts   *bool    `yaml:"prompts"`
	// Overrides are keyed by the upstream's own tool name (docs/agents.md#overrides-and-rate-limits).
	Overrides map[string]*ToolOverride `yaml:"overrides"`
}

// Sampling governs a server's sampling/createMessage requests (docs/protocol.md#requests-from-servers).
type Sampling struct {
	Enabled       *bool    `yaml:"enabled"`
	MaxRPM        int      `yaml:"max_rpm"`
	MaxTokensCap  int      `yaml:"max_tokens_cap"`
	Timeout       Duration `yaml:"timeout"`
	AllowedModels []string `yaml:"allowed_models"`
}

// Bundle grants servers to the agents that name it (docs/agents.md#agents-bundles-and-policy).
type Bundle struct {
	Servers []string `yaml:"servers"`
	Exclude []string `yaml:"exclude"`
}

// Agent is one client identity of the proxy (docs/configuration.md#agents).
type Agent struct {
	// Name is the key of the agents map; filled in by Load.
	Name string `yaml:"-"`

	MCPBundles       []string      `yaml:"mcp_bundles"`
	AllowedTools     []string      `yaml:"allowed_tools"`
	ExcludedTools    []string      `yaml:"excluded_tools"`
	Autonomy         string        `yaml:"autonomy"`
	AutoApprove      []string      `yaml:"auto_approve"`
	AlwaysAsk        []string      `yaml:"always_ask"`
	ToolFilterGroups []FilterGroup `yaml:"tool_filter_groups"`
	DeferredLoading  *bool         `yaml:"deferred_loading"`
	Tokens           []string      `yaml:"tokens"`
	// Match selects this agent from the claims of an OAuth token
	// (docs/security.md#oauth-on-the-http-listener): every claim named must hold one of the values.
	Match map[string]StringList `yaml:"match"`
	// Limits are token buckets over tool patterns (docs/agents.md#overrides-and-rate-limits).
	Limits []AgentLimit `yaml:"limits"`
}

// AgentLimit is one rate limit of an agent: one bucket per entry, shared
// by the agent's sessions.
type AgentLimit struct {
	Tools     []string `yaml:"tools"`
	PerMinute int      `yaml:"per_minute"`
	// Burst is the bucket's capacity; 0 means PerMinute.
	Burst int `yaml:"burst"`
}

// FilterGroup is one entry of tool_filter_groups.
type FilterGroup struct {
	Mode     string   `yaml:"mode"`
	Tools    []string `yaml:"tools"`
	Keywords []string `yaml:"keywords"`
}

// Listen is the downstream side: stdio, or Streamable HTTP on Addr+Path.
type Listen struct {
	Transport string `yaml:"transport"`
	Addr      string `yaml:"addr"`
	Path      string `yaml:"path"`
	// Auth makes the HTTP listener an OAuth protected resource (docs/security.md#oauth-on-the-http-listener).
	Auth *ListenAuth `yaml:"auth"`
	// PublicURL is the URL clients use; empty means http://<addr>.
	PublicURL string `yaml:"public_url"`
	// SessionIdleTimeout closes an HTTP session with no request and no
	// open stream for that long; nil means the default.
	SessionIdleTimeout *Duration `yaml:"session_idle_timeout"`
}

// ListenAuth validates OAuth access tokens on the HTTP listener.
type ListenAuth struct {
	Type           string         `yaml:"type"`
	Issuer         string         `yaml:"issuer"`
	Audience       string         `yaml:"audience"`
	JWKSURL        string         `yaml:"jwks_url"`
	RequiredScopes []string       `yaml:"required_scopes"`
	Introspection  *Introspection `yaml:"introspection"`
}

// Introspection is an RFC 7662 endpoint for opaque tokens; ClientSecret is
// a secret.
type Introspection struct {
	URL          string `yaml:"url"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
}

// Metrics serves /metrics, /healthz and /readyz on Listen when it is set.
type Metrics struct {
	Listen string `yaml:"listen"`
	Path   string `yaml:"path"`
	// Tokens are bearer tokens for /metrics and the status page; empty
	// leaves them open. /healthz and /readyz are always open.
	Tokens []string `yaml:"tokens"`
}

// Blobs controls how embedded binary blobs in tool results are handled (docs/resources.md#blobs).
type Blobs struct {
	Dir              string `yaml:"dir"`
	Mode             string `yaml:"mode"`
	MaterializeMedia bool   `yaml:"materialize_media"`
	// MaxBytes and MaxAge bound each agent's folder (docs/resources.md#blobs); 0 means the
	// default.
	MaxBytes int64    `yaml:"max_bytes"`
	MaxAge   Duration `yaml:"max_age"`
}

// Tracing exports OpenTelemetry traces over OTLP (docs/operations.md#traces). Header values
// are secrets.
type Tracing struct {
	Endpoint string            `yaml:"endpoint"`
	Protocol string            `yaml:"protocol"`
	Headers  map[string]string `yaml:"headers"`
	// SampleRatio nil means 1.0.
	SampleRatio *float64 `yaml:"sample_ratio"`
	ServiceName string   `yaml:"service_name"`
}

// Registry is an MCP Registry to search and add servers from
// (docs/configuration.md#adding-a-server-from-the-registry). An empty URL
// means the official registry. Header values are secrets.
type Registry struct {
	URL           string            `yaml:"url"`
	Headers       map[string]string `yaml:"headers"`
	TLSCACertPath string            `yaml:"tls_ca_cert_path"`
}

// Audit writes the audit log (docs/operations.md#audit-log); an empty Path turns it off.
type Audit struct {
	Path     string `yaml:"path"`
	MaxBytes int64  `yaml:"max_bytes"`
	MaxFiles int    `yaml:"max_files"`
	// Arguments is digest, full or none.
	Arguments string `yaml:"arguments"`
}

// Store is where the proxy keeps the state a request may need from another
// replica (docs/shared-state.md): memory (one process, the default) or
// redis. URL's password and EncryptionKey are secrets.
type Store struct {
	Type string `yaml:"type"`
	// URL is redis://[user:password@]host:port[/db] or rediss://...; with
	// Sentinel its host is not dialled (the sentinels name the master).
	URL string `yaml:"url"`
	// KeyPrefix starts every key the proxy writes, so that several proxies
	// (or other programs) can share one Redis.
	KeyPrefix string `yaml:"key_prefix"`
	// EncryptionKey is 32 bytes, base64: it encrypts secrets at rest and
	// seeds every derived key. Required with type redis.
	EncryptionKey string `yaml:"encryption_key"`
	// TLSCACertPath trusts this CA (PEM) for rediss:// in addition to the
	// system's.
	TLSCACertPath string `yaml:"tls_ca_cert_path"`
	// Sentinel, when set, finds the master through Redis Sentinel.
	Sentinel *Sentinel `yaml:"sentinel"`
}

// Sentinel names a master and the sentinels that watch it.
type Sentinel struct {
	Master string   `yaml:"master"`
	Addrs  []string `yaml:"addrs"`
}

// Log configures zerolog; output always goes to stderr.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Duration is a time.Duration that decodes from "120", "120s" or "2m".
// A bare integer means seconds.
type Duration time.Duration
