package config

import "time"

// Config is the whole mcp-proxy configuration file (SPEC §1). It is decoded
// strictly from YAML: a key that is not a field here is a load error.
type Config struct {
	// Enabled false connects to no upstream but keeps the definitions.
	Enabled *bool `yaml:"enabled"`
	// Naming is "zeroclaw" (<server>__<tool>) or "hermes" (mcp_<server>_<tool>).
	Naming string `yaml:"naming"`
	// DeferredLoading hides tool schemas behind tool_search (SPEC §6).
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
}

// Server is one upstream MCP server (SPEC §1.1).
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
}

// ToolFilter is a server's own include/exclude lists plus the resource and
// prompt switches.
type ToolFilter struct {
	Include   []string `yaml:"include"`
	Exclude   []string `yaml:"exclude"`
	Resources *bool    `yaml:"resources"`
	Prompts   *bool    `yaml:"prompts"`
}

// Sampling governs a server's sampling/createMessage requests (SPEC §10).
type Sampling struct {
	Enabled       *bool    `yaml:"enabled"`
	MaxRPM        int      `yaml:"max_rpm"`
	MaxTokensCap  int      `yaml:"max_tokens_cap"`
	Timeout       Duration `yaml:"timeout"`
	AllowedModels []string `yaml:"allowed_models"`
}

// Bundle grants servers to the agents that name it (SPEC §5).
type Bundle struct {
	Servers []string `yaml:"servers"`
	Exclude []string `yaml:"exclude"`
}

// Agent is one client identity of the proxy (SPEC §1.3).
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
}

// Metrics serves /metrics, /healthz and /readyz on Listen when it is set.
type Metrics struct {
	Listen string `yaml:"listen"`
	Path   string `yaml:"path"`
}

// Blobs controls how embedded binary blobs in tool results are handled (SPEC §8).
type Blobs struct {
	Dir              string `yaml:"dir"`
	Mode             string `yaml:"mode"`
	MaterializeMedia bool   `yaml:"materialize_media"`
}

// Log configures zerolog; output always goes to stderr.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Duration is a time.Duration that decodes from "120", "120s" or "2m".
// A bare integer means seconds.
type Duration time.Duration
