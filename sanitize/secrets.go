package sanitize

import "strings"

// minTokenBody is how many token characters must follow a prefix such as
// "sk-" before the whole is taken for a secret. Real keys carry 20 or more;
// six keeps short test keys covered while words like "sk-learn" stay.
const minTokenBody = 6

// tokenPrefixes start well-known credentials (case-sensitive). A match needs
// a word start before it and minTokenBody token characters after it.
var tokenPrefixes = []string{
	"sk-",         // OpenAI, Anthropic and others
	"xoxb-",       // Slack bot token
	"xoxp-",       // Slack user token
	"ghp_",        // GitHub classic personal token
	"gho_",        // GitHub OAuth token
	"ghu_",        // GitHub user-to-server token
	"github_pat_", // GitHub fine-grained token
	"AIza",        // Google API key
}

// secretKeys are the keys whose values are redacted (compared
// case-insensitively, at a word start, so "access_token" matches "token").
var secretKeys = []string{"token", "key", "apikey", "api_key", "password", "passwd", "secret"}

// candidate marks the bytes that can start a pattern, so that the scan skips
// every other byte at once.
var candidate = func() (t [256]bool) {
	t['b'], t['B'] = true, true // bearer
	for _, p := range tokenPrefixes {
		t[p[0]] = true
	}
	for _, k := range secretKeys {
		t[k[0]], t[k[0]-'a'+'A'] = true, true
	}
	return t
}()

// redactSecrets replaces secret values in s with Redacted.
func redactSecrets(s string) string {
	var out []byte
	last := 0
	for i := 0; i < len(s); {
		if !candidate[s[i]] || (i > 0 && isAlnum(s[i-1])) {
			i++
			continue
		}
		start, end, resume := matchSecret(s, i)
		if resume <= i {
			i++
			continue
		}
		if end > start {
			if out == nil {
				out = make([]byte, 0, len(s)+len(Redacted))
			}
			out = append(out, s[last:start]...)
			out = append(out, Redacted...)
			last = end
		}
		i = resume
	}
	if out == nil {
		return s
	}
	return string(append(out, s[last:]...))
}

// matchSecret tries every pattern at i. It returns the range to replace
// (empty when the value is already Redacted) and where to resume scanning;
// resume <= i means no pattern matched.
func matchSecret(s string, i int) (start, end, resume int) {
	rest := s[i:]
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(rest, p) {
			e := i + len(p)
			for e < len(s) && isTokenByte(s[e]) {
				e++
			}
			if e-i-len(p) >= minTokenBody {
				return i, e, e
			}
			return 0, 0, 0
		}
	}
	if hasPrefixFold(rest, "bearer") {
		j := i + len("bearer")
		k := skipBlanks(s, j)
		if k == j {
			return 0, 0, 0
		}
		return unquotedValue(s, k)
	}
	for _, key := range secretKeys {
		if hasPrefixFold(rest, key) {
			if start, end, resume = keyValue(s, i+len(key)); resume > i {
				return start, end, resume
			}
		}
	}
	return 0, 0, 0
}

// keyValue matches what may follow a secret key at j: `=value`, `="value"`,
// `": "value"` (the key was quoted, also JSON-escaped) or `: "value"`.
func keyValue(s string, j int) (start, end, resume int) {
	k := skipBlanks(s, j)
	if k < len(s) && s[k] == '=' {
		k = skipBlanks(s, k+1)
		if q := quoteAt(s, k); q != "" {
			return quotedValue(s, k+len(q), q)
		}
		return unquotedValue(s, k)
	}
	if q := quoteAt(s, k); q != "" && k == j {
		k += len(q)
	}
	k = skipBlanks(s, k)
	if k >= len(s) || s[k] != ':' {
		return 0, 0, 0
	}
	k = skipBlanks(s, k+1)
	if q := quoteAt(s, k); q != "" {
		return quotedValue(s, k+len(q), q)
	}
	return 0, 0, 0
}

// quoteAt returns the quote that opens at k: `"`, `'`, `\"` or "".
func quoteAt(s string, k int) string {
	switch {
	case k >= len(s):
		return ""
	case s[k] == '"':
		return `"`
	case s[k] == '\'':
		return `'`
	case strings.HasPrefix(s[k:], `\"`):
		return `\"`
	}
	return ""
}

// quotedValue finds the end of a value opened by quote q at vs. The value
// ends at the closing quote; it also stops at a line end, and at an
// unescaped '"' for the other quote kinds, so that inside a JSON string it
// never runs past the string's end. A backslash escape is kept whole.
func quotedValue(s string, vs int, q string) (start, end, resume int) {
	e := vs
	for e < len(s) {
		c := s[e]
		if c == '\n' || c == '"' || (q == `'` && c == '\'') {
			break
		}
		if c == '\\' {
			if q == `\"` && e+1 < len(s) && s[e+1] == '"' {
				break
			}
			if e+1 < len(s) && s[e+1] != '\n' {
				e += 2
				continue
			}
			break
		}
		e++
	}
	if e == vs || s[vs:e] == Redacted {
		return e, e, e
	}
	return vs, e, e
}

// unquotedValue takes the run of value bytes at vs. A value that is already
// Redacted is left alone and skipped.
func unquotedValue(s string, vs int) (start, end, resume int) {
	if strings.HasPrefix(s[vs:], Redacted) {
		e := vs + len(Redacted)
		return e, e, e
	}
	e := vs
	for e < len(s) && !isValueDelim(s[e]) {
		e++
	}
	if e == vs {
		return 0, 0, 0
	}
	return vs, e, e
}

// isValueDelim ends an unquoted value. A backslash ends it too, so that a
// replacement never splits an escape inside a JSON string.
func isValueDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '\'', '\\', ',', ';', '&', ')', ']', '}', '<', '>', '`':
		return true
	}
	return false
}

func isTokenByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func skipBlanks(s string, k int) int {
	for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
		k++
	}
	return k
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case. prefix holds only
// lower-case letters and '_'; c|0x20 lower-cases a letter and can never
// produce '_' (0x5F lacks the 0x20 bit), so no other byte matches.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if s[i] != prefix[i] && s[i]|0x20 != prefix[i] {
			return false
		}
	}
	return true
}
