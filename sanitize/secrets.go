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
// case-insensitively, at a word start, so "access_token" matches "token",
// "x-api-key" matches "key", "proxy-authorization" matches
// "authorization" and "set-cookie" matches "cookie"; a word of a camelCase
// name starts one too, so "accessToken" and "sessionCookie" match). The
// key must end where the name ends: "tokenizer", "keyboard" and
// "passwordless" are other words, and so is "monkey" (no word start).
// "api-key" is listed whole so that an X-Api-Key member's number, array
// or object value is hidden (http.Header marshals each value as an
// array), which "key" alone, too common a word, does not do.
var secretKeys = []string{
	"token", "key", "apikey", "api_key", "api-key", "password", "passwd", "passphrase", "secret",
	"authorization", "cookie", "credential", "credentials",
}

// headerKeys are the secret keys that are also HTTP header names: in a
// header line ("Cookie: a=1; b=2", at the start of a line or of a quoted
// string) their whole unquoted value is redacted. A value that starts with
// an authentication scheme keeps the scheme's name (see authSchemes).
var headerKeys = []string{"authorization", "cookie"}

// headerPrefixes may come before a header key in a header name.
var headerPrefixes = []string{"proxy-", "set-"}

// candidate marks the bytes that can start a pattern, so that the scan skips
// every other byte at once.
var candidate = func() (t [256]bool) {
	for _, sc := range authSchemes {
		t[sc.name[0]], t[sc.name[0]-'a'+'A'] = true, true
	}
	for _, p := range tokenPrefixes {
		t[p[0]] = true
	}
	for _, k := range secretKeys {
		t[k[0]], t[k[0]-'a'+'A'] = true, true
	}
	return t
}()

// byFirst holds, for each byte, the patterns that can start with it, each
// list in its list's order: the token prefixes starting with the byte
// itself (they are case-sensitive), the secret keys starting with it in
// either case, and whether an authentication scheme's name does. A pattern
// whose first byte differs can never match there, so matchSecret trying
// only these finds what trying every pattern in order would, and stops at
// the same one. schemes are indexes into authSchemes, for matchScheme.
var byFirst = func() (t struct {
	prefixes [256][]string
	keys     [256][]string
	schemes  [256][]int
}) {
	for _, p := range tokenPrefixes {
		t.prefixes[p[0]] = append(t.prefixes[p[0]], p)
	}
	for _, k := range secretKeys {
		for _, c := range []byte{k[0], k[0] - 'a' + 'A'} {
			t.keys[c] = append(t.keys[c], k)
		}
	}
	for n, sc := range authSchemes {
		for _, c := range []byte{sc.name[0], sc.name[0] - 'a' + 'A'} {
			t.schemes[c] = append(t.schemes[c], n)
		}
	}
	return t
}()

// redactSecrets replaces secret values in s, plain text, with Redacted.
func redactSecrets(s string) string { return redact(s, nil) }

// jsonText is redact's state for a JSON text (a log line). There every
// redaction stays inside the JSON string it starts in: an unescaped '"'
// always ends a string, so it never opens a quoted value, except the
// value of a member whose name is a secret key ("token": "..."), and a
// JSON-escaped quoted parameter ends at the string's end at the latest.
// Elsewhere the patterns already stop at an unescaped '"'. A nil
// *jsonText is plain text, where a quote after a key opens the value.
type jsonText struct {
	// bounded is set when a quote was read as a string's end where plain
	// text takes it to open a value: only for valid JSON is that right.
	bounded bool
}

// mark notes, when j is a JSON text, that a quote was read as a string's
// end; it reports whether j is one.
func (j *jsonText) mark() bool {
	if j == nil {
		return false
	}
	j.bounded = true
	return true
}

// redact replaces secret values in s with Redacted; js is nil for plain
// text (see jsonText).
func redact(s string, js *jsonText) string {
	ed := edits{s: s}
	// Once an array or object after a secret key runs to the end of s
	// unclosed (s is no valid JSON), no later one is looked for: each
	// would be scanned to the end again, a quadratic cost.
	closed := true
	for i := 0; i < len(s); {
		if !candidate[s[i]] {
			i++
			continue
		}
		word := wordStart(s, i)
		if !word && !camelStart(s, i) {
			i++
			continue
		}
		start, end, resume, quote := matchSecret(s, i, word, js, &closed)
		if resume <= i {
			i++
			continue
		}
		switch {
		case end > start && quote != "":
			ed.replace(start, end, quote, Redacted, quote)
		case end > start:
			ed.replace(start, end, Redacted)
		}
		i = resume
	}
	return ed.String()
}

// wordStart reports whether a pattern may start at i: at the start of s,
// after a byte that is no letter or digit, after a JSON escape of a line
// end or tab (`\nCookie:` inside a JSON string), or after a \u escape of
// anything but an ASCII letter or digit (encoding/json writes '&', '<'
// and '>' as \u0026, \u003c and \u003e: `user=bob\u0026password=...`).
func wordStart(s string, i int) bool {
	if i == 0 || !isAlnum(s[i-1]) {
		return true
	}
	c := s[i-1]
	if (c == 'n' || c == 'r' || c == 't') && i >= 2 && s[i-2] == '\\' {
		return true
	}
	if i >= 6 && s[i-6] == '\\' && s[i-5] == 'u' {
		v, ok := hex4(s, i-4)
		return ok && (v >= 0x80 || !isAlnum(byte(v)))
	}
	return false
}

// camelStart reports whether i starts a word of a camelCase name: an upper
// case letter after a lower case letter or a digit ("accessToken",
// "sessionCookie", "v2Key"). Only secret keys are looked for there, not
// token prefixes or scheme names.
func camelStart(s string, i int) bool {
	return i > 0 && isUpper(s[i]) && (isLower(s[i-1]) || isDigit(s[i-1]))
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// matchSecret tries every pattern at i: token prefixes and scheme names
// only at a word start (word), secret keys also at a camelCase boundary.
// It returns the range to replace (empty when the value is already
// Redacted), where to resume scanning (resume <= i means no pattern
// matched) and, when the marker replaces a JSON value that is not a
// string, the quote to put around it (`"`, or `\"` in JSON quoted in a
// string). *closed is cleared when an array or
// object value is found unclosed, and no such value is looked for while
// it is clear. js is redact's.
func matchSecret(s string, i int, word bool, js *jsonText, closed *bool) (start, end, resume int, quote string) {
	rest := s[i:]
	for _, p := range byFirst.prefixes[s[i]] {
		if word && strings.HasPrefix(rest, p) {
			e := i + len(p)
			for e < len(s) && isTokenByte(s[e]) {
				e++
			}
			if e-i-len(p) >= minTokenBody {
				return i, e, e, ""
			}
			return 0, 0, 0, ""
		}
	}
	if word {
		if start, end, resume = matchScheme(s, i); resume > i {
			return start, end, resume, ""
		}
	}
	for _, key := range byFirst.keys[s[i]] {
		if !hasPrefixFold(rest, key) {
			continue
		}
		j := i + len(key)
		if start, end, resume = keyValue(s, j, key, js); resume > i {
			return start, end, resume, ""
		}
		if start, end, resume = headerLine(s, i, key, js); resume > i {
			return start, end, resume, ""
		}
		if key != "key" && *closed {
			start, end, q, ok := structuredValue(s, j)
			if end > start {
				return start, end, end, q
			}
			*closed = ok
		}
	}
	return 0, 0, 0, ""
}

// headerLine matches a header line of one of headerKeys at i ("Cookie:
// a=1"): the whole value is replaced, up to the end of the line or of the
// JSON string that holds it. The header name must start a line or a
// quoted string, so that prose such as "needs authorization: the token
// expired" keeps its words. A leading authentication scheme's name stays.
// js is redact's.
func headerLine(s string, i int, key string, js *jsonText) (start, end, resume int) {
	if !isHeaderKey(key) {
		return 0, 0, 0
	}
	j := i + len(key)
	if j >= len(s) || s[j] != ':' || !startsHeaderName(s, i) {
		return 0, 0, 0
	}
	k := skipBlanks(s, j+1)
	if k == j+1 || k >= len(s) || quoteAt(s, k) != "" {
		return 0, 0, 0
	}
	if strings.HasPrefix(s[k:], Redacted) {
		e := k + len(Redacted)
		return e, e, e
	}
	if a := afterScheme(s, k); a > k {
		k = a
		if strings.HasPrefix(s[k:], Redacted) {
			e := k + len(Redacted)
			return e, e, e
		}
	}
	e := headerValueEnd(s, k, js)
	if e == k {
		return 0, 0, 0
	}
	return k, e, e
}

// afterScheme returns where the credential starts when an authentication
// scheme's name and blanks are at k, else k.
func afterScheme(s string, k int) int {
	for _, sc := range authSchemes {
		if hasPrefixFold(s[k:], sc.name) {
			n := k + len(sc.name)
			if e := skipBlanks(s, n); e > n {
				return e
			}
		}
	}
	return k
}

func isHeaderKey(key string) bool {
	for _, h := range headerKeys {
		if h == key {
			return true
		}
	}
	return false
}

// startsHeaderName reports whether the header key at i, with any of
// headerPrefixes before it, begins the text, a line (also a JSON-escaped
// \n) or a quoted string.
func startsHeaderName(s string, i int) bool {
	for _, p := range headerPrefixes {
		if i >= len(p) && hasPrefixFold(s[i-len(p):], p) {
			i -= len(p)
			break
		}
	}
	if i == 0 {
		return true
	}
	switch s[i-1] {
	case '\n', '"', '\'':
		return true
	case 'n':
		return i >= 2 && s[i-2] == '\\'
	}
	return false
}

// keyValue matches what may follow a secret key at j: `=value`, `="value"`,
// `": "value"` (the key was quoted, also JSON-escaped) or `: "value"`.
// The quoted value of a header key keeps a leading authentication
// scheme's name ("Basic [REDACTED]"), whatever follows it. In a JSON
// text (see jsonText), an unescaped '"' opens a value only after a member
// name that ends with the key: elsewhere it is the end of the JSON string
// that holds the key (`"error":"token=","id":1`).
func keyValue(s string, j int, key string, js *jsonText) (start, end, resume int) {
	header := isHeaderKey(key)
	quoted := func(vs int, q string) (start, end, resume int) {
		start, end, resume = quotedValue(s, vs, q)
		if end > start && header {
			start = min(afterScheme(s, start), end)
		}
		return start, end, resume
	}
	k := skipBlanks(s, j)
	if k < len(s) && s[k] == '=' {
		k = skipBlanks(s, k+1)
		if q := quoteAt(s, k); q != "" && !(q == `"` && js.mark()) {
			return quoted(k+len(q), q)
		}
		if header {
			k = afterScheme(s, k)
		}
		return unquotedValue(s, k)
	}
	closer := ""
	if q := quoteAt(s, k); q != "" && k == j {
		closer = q
		k += len(q)
	}
	k = skipBlanks(s, k)
	if k >= len(s) || s[k] != ':' {
		return 0, 0, 0
	}
	k = skipBlanks(s, k+1)
	if q := quoteAt(s, k); q != "" && !(q == `"` && closer != `"` && js.mark()) {
		return quoted(k+len(q), q)
	}
	return 0, 0, 0
}

// structuredValue matches, after a secret key at j, the end of a JSON
// member name and a value that is a number, an array or an object
// (`": 123`, `": [...]`, `": {...}`, also in JSON quoted in a string:
// `\": [\"a\"]`); it returns the value's range, empty when there is
// none, and the name's closing quote. The whole value becomes the string "[REDACTED]", so
// that JSON stays valid. matchSecret leaves out the key "key", too common
// a word in ordinary arguments. ok is false when an array or object there
// is not closed before the end of s.
func structuredValue(s string, j int) (start, end int, q string, ok bool) {
	switch {
	case j < len(s) && s[j] == '"':
		q = `"`
	case strings.HasPrefix(s[j:], `\"`):
		q = `\"`
	default:
		return 0, 0, "", true
	}
	k := skipBlanks(s, j+len(q))
	if k >= len(s) || s[k] != ':' {
		return 0, 0, "", true
	}
	k = skipBlanks(s, k+1)
	e := jsonValueEnd(s, k, q)
	if e > k && !endsJSONValue(s, e) {
		return 0, 0, "", true // "password": 12abc is no JSON: left to the other patterns
	}
	return k, e, q, e > k || k >= len(s) || (s[k] != '[' && s[k] != '{')
}

// endsJSONValue reports whether a JSON value may end at e: what follows
// is, after blanks, the end of s or of a line, or a ',', '}' or ']'.
func endsJSONValue(s string, e int) bool {
	e = skipBlanks(s, e)
	return e == len(s) || strings.IndexByte(",}]\n\r", s[e]) >= 0
}

// jsonValueEnd returns the end of the JSON number, array or object at k,
// or k when there is none or it is not closed. Strings inside (opened by
// q: `"`, or `\"` in JSON quoted in a string) are skipped with their
// escapes, so a bracket in a string does not count. In JSON quoted in a
// string, an unescaped '"' is the end of that string: the value is not
// closed.
func jsonValueEnd(s string, k int, q string) int {
	if k >= len(s) {
		return k
	}
	if c := s[k]; c == '-' || isDigit(c) {
		e := k + 1
		for e < len(s) && (isDigit(s[e]) || strings.IndexByte(".eE+-", s[e]) >= 0) {
			e++
		}
		return e
	}
	if s[k] != '[' && s[k] != '{' {
		return k
	}
	depth := 0
	for e := k; e < len(s); e++ {
		switch s[e] {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return e + 1
			}
		case '"':
			if q != `"` {
				return k
			}
			e = jsonStringEnd(s, e+1)
		case '\\':
			if q == `"` || e+1 >= len(s) || s[e+1] != '"' {
				return k // no escape outside a JSON string
			}
			end, closed := escapedParamEnd(s, e+2)
			if !closed {
				return k
			}
			e = end - 1
		}
	}
	return k
}

// quoteAt returns the quote that opens at k: `"`, `'`, or an escaped
// quote: `\"` inside a JSON string, `\\\"` inside a JSON string held by
// one (an odd run of backslashes before '"'); "" for none.
func quoteAt(s string, k int) string {
	switch {
	case k >= len(s):
		return ""
	case s[k] == '"':
		return `"`
	case s[k] == '\'':
		return `'`
	case s[k] == '\\':
		if r := backslashRun(s, k); r%2 == 1 && k+r < len(s) && s[k+r] == '"' {
			return s[k : k+r+1]
		}
	}
	return ""
}

// backslashRun returns the length of the run of backslashes at k.
func backslashRun(s string, k int) int {
	e := k
	for e < len(s) && s[e] == '\\' {
		e++
	}
	return e - k
}

// quotedValue finds the end of a value opened by quote q at vs. The value
// ends at the closing quote; it also stops at a line end, and at an
// unescaped '"' for the other quote kinds, so that inside a JSON string it
// never runs past the string's end. A backslash escape is kept whole. In
// a value opened by an escaped quote, a quote escaped with fewer
// backslashes is the end of a string that holds the value, and one
// escaped with more is inside it (`password=\"p\\\"w\"` is p\"w).
func quotedValue(s string, vs int, q string) (start, end, resume int) {
	e := vs
	for e < len(s) {
		c := s[e]
		if c == '\n' || c == '"' || (q == `'` && c == '\'') {
			break
		}
		if c == '\\' && len(q) > 1 {
			r := backslashRun(s, e)
			if e+r < len(s) && s[e+r] == '"' {
				if r%2 == 0 {
					e += r // escaped backslashes, then the JSON string's end
					break
				}
				if r <= len(q)-1 {
					break // the closing quote, or the end of a string that holds the value
				}
				e += r + 1
				continue
			}
			e += r
			continue
		}
		if c == '\\' {
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

// skipBlanks returns the end of the run of spaces and tabs at k, raw or
// JSON-escaped ("\t", "\u0020", "\u0009"), so that a credential in a JSON
// string is found whichever way its blank was written. Line ends, raw or
// escaped, are no blanks: what follows one is another line.
func skipBlanks(s string, k int) int {
	for k < len(s) {
		switch {
		case s[k] == ' ' || s[k] == '\t':
			k++
		case strings.HasPrefix(s[k:], `\t`):
			k += 2
		case hasPrefixFold(s[k:], `\u0020`) || hasPrefixFold(s[k:], `\u0009`):
			k += 6
		default:
			return k
		}
	}
	return k
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case; prefix is lower
// case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}
