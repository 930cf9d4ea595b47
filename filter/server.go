package filter

// ServerTool reports whether a server's own tool name passes that server's
// tools.include / tools.exclude globs (docs/agents.md#the-policy-rules, rule 2). With include set,
// only matching tools pass and exclude is not consulted (the seed's "include
// wins"); with only exclude set, matching tools are dropped; with neither,
// every tool passes. The globs are the policy patterns' (matchPattern): '*'
// matches any run of characters, '/' included, and nothing else is special.
func ServerTool(include, exclude []string, name string) bool {
	if len(include) > 0 {
		return matchList(include, name)
	}
	return !matchList(exclude, name)
}
