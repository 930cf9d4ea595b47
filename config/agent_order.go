package config

import (
	"sort"

	"gopkg.in/yaml.v3"
)

// documentAgentOrder returns the agent names in the order the document
// writes them under agents (keys brought in by a "<<" merge follow the
// explicit ones, as the merge puts them). YAML mappings decode into a Go
// map, which forgets this order; docs/security.md#oauth-on-the-http-listener needs it ("the first matching
// agent in config order").
func documentAgentOrder(root *yaml.Node) []string {
	if root == nil {
		return nil
	}
	walker := &shapeChecker{present: map[string]bool{}}
	for _, p := range walker.pairs(root, "") {
		if mapKey(p.k) != "agents" {
			continue
		}
		agents := resolveAlias(p.v)
		if agents.Kind != yaml.MappingNode {
			return nil
		}
		var names []string
		for _, a := range walker.pairs(agents, "agents") {
			names = append(names, mapKey(a.k))
		}
		return names
	}
	return nil
}

// AgentsInOrder returns the names of the defined agents in config order:
// the order in which the document that Parse read lists them, then, sorted
// by name, any agent the document did not list (a Config built in code has
// no document, so its order is by name). It is the order in which the HTTP
// listener tries agents' match rules on its default endpoint (docs/security.md#oauth-on-the-http-listener).
// Empty when HasAgents is false.
func (c *Config) AgentsInOrder() []string {
	out := make([]string, 0, len(c.Agents))
	seen := make(map[string]bool, len(c.Agents))
	for _, name := range c.doc.agentOrder {
		if _, ok := c.Agents[name]; ok && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	var rest []string
	for name := range c.Agents {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}
