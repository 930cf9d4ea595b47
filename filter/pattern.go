package filter

import "strings"

// matchPattern reports whether name matches p: an exact name, "*" for every
// name, or a glob with one '*' standing for any run of characters
// (`filesystem__*`, `*__write_file`, `git*_log`). Config validation rejects
// patterns with more than one '*'.
func matchPattern(p, name string) bool {
	before, after, found := strings.Cut(p, "*")
	if !found {
		return p == name
	}
	return len(name) >= len(before)+len(after) && strings.HasPrefix(name, before) && strings.HasSuffix(name, after)
}

// matchList reports whether name matches any pattern of list.
func matchList(list []string, name string) bool {
	for _, p := range list {
		if matchPattern(p, name) {
			return true
		}
	}
	return false
}
