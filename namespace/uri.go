package namespace

import "strings"

// URIPrefix is the server's part of a native proxied resource URI: the
// server name lowercased (ASCII) with '_' turned into '-'. Two servers with
// one URIPrefix cannot both be configured (the config loader rejects them).
func URIPrefix(server string) string {
	return strings.ReplaceAll(asciiLower(server), "_", "-")
}

// WrapURI is the native proxied form of an upstream resource URI:
// "<URIPrefix(server)>+<uri>", itself a URI with the scheme
// "<prefix>+<original scheme>".
func WrapURI(server, uri string) string {
	return URIPrefix(server) + "+" + uri
}

// WrapSeedURI is the seed's form of an upstream resource URI, used by the
// mcp_resources tool: "<server>__<uri>".
func WrapSeedURI(server, uri string) string {
	return server + "__" + uri
}

// ParseURI undoes WrapURI or WrapSeedURI. servers is the set of known server
// names; empty names in it are ignored. The native form is tried first, and
// its prefix is matched ignoring ASCII case (hosts may normalise a URI
// scheme to lower case); a prefix that two listed servers share is refused.
// In the seed form the longest server name followed by "__" wins: with
// servers "a" and "a_", "a___x" is server "a_", uri "x" (a real URI does not
// start with '_').
func ParseURI(uri string, servers []string) (server, original string, ok bool) {
	if s, rest, ok := parseNative(uri, servers); ok {
		return s, rest, true
	}
	return parseSeed(uri, servers)
}

func parseNative(uri string, servers []string) (string, string, bool) {
	p, rest, found := strings.Cut(uri, "+")
	if !found || p == "" {
		return "", "", false
	}
	p = asciiLower(p)
	match := ""
	for _, s := range servers {
		if s == "" || s == match || URIPrefix(s) != p {
			continue
		}
		if match != "" {
			return "", "", false
		}
		match = s
	}
	return match, rest, match != ""
}

func parseSeed(uri string, servers []string) (string, string, bool) {
	match := ""
	for _, s := range servers {
		if s != "" && len(s) > len(match) && strings.HasPrefix(uri, s) && strings.HasPrefix(uri[len(s):], "__") {
			match = s
		}
	}
	if match == "" {
		return "", "", false
	}
	return match, uri[len(match)+2:], true
}

// asciiLower lowercases A-Z only, so no non-ASCII character can fold onto a
// server name.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
