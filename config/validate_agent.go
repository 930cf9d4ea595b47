package config

import "strings"

func (c *Config) validateAgents(v *validator) {
	checkNames(v, "agents", "agent", sortedKeys(c.Agents), func(path, name string, _ bool) {
		if a := c.Agents[name]; a != nil {
			validateAgent(v, path, a)
		}
	})
}

func validateAgent(v *validator, path string, a *Agent) {
	at := func(field string) string { return path + "." + field }
	v.oneOf(at("autonomy"), a.Autonomy, autonomyModes)
	for i, t := range a.AllowedTools {
		if t == "" {
			v.add(indexPath(at("allowed_tools"), i), "empty tool name")
		}
	}
	checkPatterns(v, at("excluded_tools"), a.ExcludedTools)
	checkPatterns(v, at("auto_approve"), a.AutoApprove)
	checkPatterns(v, at("always_ask"), a.AlwaysAsk)
	for i, g := range a.ToolFilterGroups {
		gp := indexPath(at("tool_filter_groups"), i)
		v.oneOf(gp+".mode", g.Mode, groupModes)
		checkPatterns(v, gp+".tools", g.Tools)
	}
	checkTokens(v, at("tokens"), a.Tokens)
}

// checkPatterns checks tool name patterns: exact names, or globs with at
// most one "*" (docs/agents.md#agents-bundles-and-policy).
func checkPatterns(v *validator, path string, patterns []string) {
	for i, p := range patterns {
		switch {
		case p == "":
			v.add(indexPath(path, i), "empty pattern")
		case strings.Count(p, "*") > 1:
			v.add(indexPath(path, i), "pattern "+quoteValue(p)+` has more than one "*"`)
		}
	}
}
