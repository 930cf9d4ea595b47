package registry

import (
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// ConfigName makes a valid config server name of s (config.ServerName)
// without leading or trailing "-" or "_"; "server" when nothing is left.
func ConfigName(s string) string {
	name := strings.Trim(config.ServerName(s), "-_")
	if name == "" {
		return "server"
	}
	return name
}

// lastSegment is what follows the last "/" of a registry or package name.
func lastSegment(name string) string {
	return name[strings.LastIndex(name, "/")+1:]
}

// hostName names a server after its URL's host: the first label that is
// not a generic one (mcp, api, www), else the first label.
func hostName(host string) string {
	labels := strings.Split(host, ".")
	for _, l := range labels[:max(len(labels)-1, 1)] {
		switch strings.ToLower(l) {
		case "mcp", "api", "www":
			continue
		}
		return l
	}
	return labels[0]
}

// Closest returns the names of candidates nearest to name by edit
// distance, at most n, nearest first. A candidate is near when it is at
// most a third of name's last segment away (and at least 2), or when it
// holds that segment whole.
func Closest(name string, candidates []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	var list []scored
	limit := max(len(lastSegment(name))/3, 2)
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := distance(strings.ToLower(name), strings.ToLower(c))
		// A candidate that holds the name's own last segment is close
		// whatever its namespace.
		if strings.Contains(strings.ToLower(c), strings.ToLower(lastSegment(name))) {
			d = min(d, limit)
		}
		if d <= limit {
			list = append(list, scored{c, d})
		}
	}
	for i := 1; i < len(list); i++ { // insertion sort: stable, lists are short
		for j := i; j > 0 && (list[j].d < list[j-1].d || list[j].d == list[j-1].d && list[j].name < list[j-1].name); j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	var out []string
	for i := 0; i < len(list) && len(out) < n; i++ {
		if i > 0 && list[i].name == list[i-1].name {
			continue
		}
		out = append(out, list[i].name)
	}
	return out
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
