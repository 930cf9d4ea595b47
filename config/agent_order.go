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
func documentAgentOrder(root *yaml.Node) []string { return documentKeyOrder(root, "agents") }

// documentServerOrder returns the server names in the order the document
// writes them under servers (see ServersInOrder).
func documentServerOrder(root *yaml.Node) []string { return documentKeyOrder(root, "servers") }

// documentKeyOrder returns the keys of the top-level mapping section in
// the order the document writes them.
func documentKeyOrder(root *yaml.Node, section string) []string {
	if root == nil {
		return nil
	}
	walker := &shapeChecker{present: map[string]bool{}}
	for _, p := range walker.pairs(root, "") {
		if mapKey(p.k) != section {
			continue
		}
		m := resolveAlias(p.v)
		if m.Kind != yaml.MappingNode {
			return nil
		}
		var names []string
		for _, a := range walker.pairs(m, section) {
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
	return inDocumentOrder(c.doc.agentOrder, c.Agents)
}

// ServersInOrder returns the names of the configured servers in config
// order: the order in which the document that Parse read lists them, then,
// sorted by name, any server the document did not list (a Config built in
// code has no document, so its order is by name). It is the order of the
// merged lists clients get (docs/protocol.md#list-order-and-cache-hints).
func (c *Config) ServersInOrder() []string {
	return inDocumentOrder(c.doc.serverOrder, c.Servers)
}

// inDocumentOrder is the keys of m in the order of doc, then the rest
// sorted.
func inDocumentOrder[V any](doc []string, m map[string]V) []string {
	out := make([]string, 0, len(m))
	seen := make(map[string]bool, len(m))
	for _, name := range doc {
		if _, ok := m[name]; ok && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	var rest []string
	for name := range m {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}
