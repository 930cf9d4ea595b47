package filter

import "path"

// ServerTool reports whether a server's own tool name passes that server's
// tools.include / tools.exclude globs (SPEC §5 rule 2). With include set,
// only matching tools pass and exclude is not consulted (the seed's "include
// wins"); with only exclude set, matching tools are dropped; with neither,
// every tool passes. Globs use path.Match syntax; a malformed pattern matches
// nothing (config validation rejects them before they get here).
func ServerTool(include, exclude []string, name string) bool {
	if len(include) > 0 {
		return matchAny(include, name)
	}
	return !matchAny(exclude, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}
