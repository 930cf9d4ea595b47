package oauthclient

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Bounds on a WWW-Authenticate header, which comes from the network: longer
// or more values are cut before parsing.
const (
	maxChallengeHeaders = 8
	maxChallengeBytes   = 8 << 10
	maxScopes           = 64
	maxScopeLen         = 256
)

// Challenge is what the proxy uses of a Bearer challenge (RFC 6750 §3,
// RFC 9728 §5.1).
type Challenge struct {
	// ResourceMetadata is the resource_metadata URL, "" if none.
	ResourceMetadata string
	// Scopes are the scope parameter's space-separated scopes.
	Scopes []string
	// Error and Description are the error and error_description parameters.
	Error, Description string
}

// ParseChallenge reads the values of WWW-Authenticate headers. It never
// fails: a value it cannot parse contributes nothing, and the login then
// discovers through the well-known URIs. resource_metadata is taken from
// the first challenge that has it, the other parameters from the first
// Bearer challenge.
func ParseChallenge(values []string) Challenge {
	var out Challenge
	bearer := false
	for i, v := range values {
		if i == maxChallengeHeaders {
			break
		}
		if len(v) > maxChallengeBytes {
			v = v[:maxChallengeBytes]
		}
		// One value at a time, so that a malformed one does not hide the
		// others.
		cs, err := oauthex.ParseWWWAuthenticate([]string{v})
		if err != nil {
			continue
		}
		for _, c := range cs {
			if out.ResourceMetadata == "" {
				out.ResourceMetadata = strings.TrimSpace(c.Params["resource_metadata"])
			}
			if c.Scheme != "bearer" || bearer {
				continue
			}
			bearer = true
			out.Scopes = splitScopes(c.Params["scope"])
			out.Error = c.Params["error"]
			out.Description = cut(c.Params["error_description"], 200)
		}
	}
	return out
}

// splitScopes splits a scope string, dropping over-long scopes and keeping
// at most maxScopes, without duplicates.
func splitScopes(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if len(out) == maxScopes {
			break
		}
		if len(f) <= maxScopeLen && !contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// union returns a followed by the scopes of b it lacks.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, s := range b {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// covers reports whether have holds every scope of want.
func covers(have, want []string) bool {
	for _, s := range want {
		if !contains(have, s) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cut shortens s to at most n bytes, on a rune boundary, and removes
// control characters (untrusted text headed for logs).
func cut(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
