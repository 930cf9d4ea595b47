package config

import (
	"strings"
	"time"
)

// IsEnabled reports the top-level enabled switch (nil means true): false
// connects to no upstream server.
func (c *Config) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// CallToolListed reports whether deferred mode lists call_tool
// (deferred_call_tool; nil means true).
func (c *Config) CallToolListed() bool { return c.DeferredCallTool == nil || *c.DeferredCallTool }

// DeferredFor reports whether agent a runs in deferred mode: its own
// deferred_loading when set, else the top-level value. a may be nil (the
// implicit agent).
func (c *Config) DeferredFor(a *Agent) bool {
	if a != nil && a.DeferredLoading != nil {
		return *a.DeferredLoading
	}
	return c.DeferredLoading
}

// HasAgents reports whether agents are defined. Without them the proxy
// serves one implicit agent, ImplicitAgent, granted every enabled server
// with autonomy full (docs/agents.md#agents-bundles-and-policy); an empty agents map counts as none.
func (c *Config) HasAgents() bool { return len(c.Agents) > 0 }

// ServerNames returns the names of all configured servers, sorted.
func (c *Config) ServerNames() []string { return sortedKeys(c.Servers) }

// AgentNames returns the names of the defined agents, sorted (empty when
// HasAgents is false).
func (c *Config) AgentNames() []string { return sortedKeys(c.Agents) }

// IsEnabled reports the server's enabled switch (nil means true).
func (s *Server) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// PrefixValue is the namespace prefix of the server's tools and prompts:
// the server name when prefix is unset, else prefix ("" exposes bare names).
func (s *Server) PrefixValue() string {
	if s.Prefix == nil {
		return s.Name
	}
	return *s.Prefix
}

// ResourcesEnabled reports tools.resources (nil means true).
func (s *Server) ResourcesEnabled() bool { return s.Tools.Resources == nil || *s.Tools.Resources }

// PromptsEnabled reports tools.prompts (nil means true).
func (s *Server) PromptsEnabled() bool { return s.Tools.Prompts == nil || *s.Tools.Prompts }

// ReconnectWaitValue is reconnect_wait, with nil meaning the default (5 s);
// 0 turns the wait off.
func (s *Server) ReconnectWaitValue() time.Duration {
	if s.ReconnectWait == nil {
		return DefaultReconnectWait
	}
	return s.ReconnectWait.D()
}

// ResponseLimit is max_response_bytes, with 0 meaning the default.
func (s *Server) ResponseLimit() int64 {
	if s.MaxResponseBytes == 0 {
		return DefaultMaxResponseBytes
	}
	return s.MaxResponseBytes
}

// URIPrefix is the prefix of the server's native resource URIs (docs/resources.md#resources-and-prompts),
// written "<prefix>+<original uri>"; see ResourcePrefix.
func (s *Server) URIPrefix() string { return ResourcePrefix(s.Name) }

// ResourcePrefix maps a server name to its resource URI prefix (docs/resources.md#resources-and-prompts):
// lowercased, with "_" replaced by "-". Validate refuses two servers with
// the same prefix.
func ResourcePrefix(server string) string {
	return strings.ReplaceAll(strings.ToLower(server), "_", "-")
}

// IsEnabled reports sampling.enabled (nil means true).
func (s Sampling) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }
