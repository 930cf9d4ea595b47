package namespace

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Style is the naming scheme of exposed tool and prompt names (config key
// "naming").
type Style string

const (
	// StyleZeroclaw exposes "<prefix>__<tool>" (the default).
	StyleZeroclaw Style = "zeroclaw"
	// StyleHermes exposes "mcp_<prefix>_<tool>" with '-' and '.' as '_'.
	StyleHermes Style = "hermes"
)

// Valid reports whether s is a known style.
func (s Style) Valid() bool { return s == StyleZeroclaw || s == StyleHermes }

const (
	// MaxNameLen is the longest exposed name the large model APIs accept
	// (their pattern is ^[A-Za-z0-9_-]{1,64}$).
	MaxNameLen = 64
	// hashLen is the number of hex digits in a hash suffix.
	hashLen = 6
)

// ValidName reports whether s matches ^[A-Za-z0-9_-]{1,64}$.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

// DefaultDescription is the description given to a tool whose upstream sent
// none (seed text).
func DefaultDescription(server, tool string) string {
	return "MCP tool " + tool + " from " + server
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// prefixedName is the exposed form of tool under prefix, before any
// collision handling.
func (s Style) prefixedName(prefix, tool string) string {
	if s == StyleHermes {
		return fit(sanitize("mcp_"+prefix+"_"+tool, true))
	}
	return fit(sanitize(prefix+"__"+tool, false))
}

// NamePrefix is how the exposed names of a server with this prefix begin:
// "<prefix>__" or "mcp_<prefix>_" (sanitized); "" for a bare ("") prefix.
// It tells whose a name would be when no server lists it, for an error
// that says why; routing never parses names (Table does).
func (s Style) NamePrefix(prefix string) string {
	if prefix == "" {
		return ""
	}
	if s == StyleHermes {
		return sanitize("mcp_"+prefix+"_", true)
	}
	return sanitize(prefix+"__", false)
}

// bareName is the exposed form of an unprefixed tool, before any collision
// handling. It is "" only for an empty tool name.
func (s Style) bareName(tool string) string {
	return fit(sanitize(tool, s == StyleHermes))
}

// sanitize replaces every character outside [A-Za-z0-9_-] with '_' (and '-'
// too when hermes is set). Each invalid UTF-8 byte counts as one character.
func sanitize(raw string, hermes bool) string {
	clean := true
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; !nameByte(c) || hermes && c == '-' {
			clean = false
			break
		}
	}
	if clean {
		return raw
	}
	var b strings.Builder
	b.Grow(len(raw))
	for _, r := range raw {
		if r < utf8.RuneSelf && nameByte(byte(r)) && !(hermes && r == '-') {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// fit cuts a sanitized name longer than MaxNameLen to exactly MaxNameLen:
// the first MaxNameLen-1-hashLen bytes, '_', and hash digits of the whole
// name.
func fit(name string) string {
	if len(name) <= MaxNameLen {
		return name
	}
	return withSuffix(name, shortHash(name))
}

// withSuffix appends "_"+suffix to name, first cutting name so that the
// result is at most MaxNameLen bytes. name is ASCII.
func withSuffix(name, suffix string) string {
	if len(name)+1+len(suffix) > MaxNameLen {
		name = name[:MaxNameLen-1-len(suffix)]
	}
	return name + "_" + suffix
}

// shortHash is the first hashLen hex digits of the SHA-256 of text.
func shortHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:hashLen/2])
}
