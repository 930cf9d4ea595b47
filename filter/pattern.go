package filter

import "strings"

// matchPattern reports whether name matches p: an exact name, "*" for every
// name, or a glob in which each '*' stands for any run of characters, '/'
// included (`filesystem__*`, `*__write_file`, `git*_log`, `delete*` matching
// `delete/all`). Tool names are not paths, so no character is special but
// '*'. Config validation allows one '*' in policy patterns; the server's
// tools.include/exclude may hold more.
func matchPattern(p, name string) bool {
	first, rest, found := strings.Cut(p, "*")
	if !found {
		return p == name
	}
	if !strings.HasPrefix(name, first) {
		return false
	}
	name = name[len(first):]
	// Between the stars, each literal part is taken at its first match:
	// an earlier match leaves the most room for the parts after it.
	for {
		part, more, found := strings.Cut(rest, "*")
		if !found {
			return len(name) >= len(part) && strings.HasSuffix(name, part)
		}
		i := strings.Index(name, part)
		if i < 0 {
			return false
		}
		name, rest = name[i+len(part):], more
	}
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
