package config

import (
	"fmt"
	"strconv"
)

// Warnings returns the non-fatal findings of docs/agents.md#agents-bundles-and-policy, in a stable order,
// each prefixed by its key path: with no agents, a note that the implicit
// agent gets every enabled server; with agents, servers that no bundle can
// grant; bundles naming unknown servers (in servers or exclude: a typo in
// exclude silently widens a grant); agents naming unknown bundles; tool
// overrides that mark a tool read-only (docs/agents.md#overrides-and-rate-limits: read_only agents then
// reach it).
func (c *Config) Warnings() []string {
	var out []string
	if !c.HasAgents() {
		out = append(out, "agents: none defined, so the implicit agent "+strconv.Quote(ImplicitAgent)+
			" gets every enabled server with autonomy full")
	} else if len(c.Servers) > 0 && len(c.Bundles) == 0 {
		out = append(out, "bundles: servers are configured but no bundle grants them, so no agent reaches any server")
	}
	for _, name := range sortedKeys(c.Bundles) {
		b := c.Bundles[name]
		if b == nil {
			continue
		}
		path := joinPath("bundles", pathKey(name))
		for i, s := range b.Servers {
			if c.Servers[s] == nil {
				out = append(out, fmt.Sprintf("%s: unknown server %s grants nothing", indexPath(path+".servers", i), quoteValue(s)))
			}
		}
		for i, s := range b.Exclude {
			if c.Servers[s] == nil {
				out = append(out, fmt.Sprintf("%s: unknown server %s, so this exclude has no effect", indexPath(path+".exclude", i), quoteValue(s)))
			}
		}
	}
	for _, name := range sortedKeys(c.Agents) {
		a := c.Agents[name]
		if a == nil {
			continue
		}
		for i, b := range a.MCPBundles {
			if c.Bundles[b] == nil {
				out = append(out, fmt.Sprintf("%s: unknown bundle %s grants nothing",
					indexPath(joinPath("agents", pathKey(name))+".mcp_bundles", i), quoteValue(b)))
			}
		}
	}
	out = append(out, c.overrideWarnings()...)
	out = append(out, c.listenAuthWarnings()...)
	return append(out, c.metricsWarnings()...)
}
