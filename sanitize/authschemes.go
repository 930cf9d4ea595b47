package sanitize

import (
	"encoding/base64"
	"strings"
)

// minOpaqueCredential is the shortest token68 taken for the credential of
// an opaque scheme (Negotiate, NTLM, DPoP). Real ones are 40 characters
// or more; 16 keeps short words after the scheme name as they are, and a
// longer one that has the shape of a word is kept too (see wordShaped).
const minOpaqueCredential = 16

// credentialShape says what follows an HTTP authentication scheme's name
// when it is a credential, and so how much of it is replaced.
type credentialShape int

const (
	// shapeAny: any value is the credential (Bearer).
	shapeAny credentialShape = iota
	// shapeBasic: a token68 that decodes to user:password (RFC 7617).
	shapeBasic
	// shapeOpaque: a token68 of at least minOpaqueCredential characters
	// that is not shaped like a word.
	shapeOpaque
	// shapeParams: a list of auth-params (name=value, ...) that holds one
	// of the scheme's credential parameters; the list is replaced, quoted
	// values included, and what follows it stays.
	shapeParams
)

// authSchemes are the HTTP authentication schemes (the IANA registry and
// AWS's) whose credentials Text replaces wherever they appear: in an
// Authorization header line, a JSON value, an error text. The scheme name
// stays, so a reader still sees which kind of credential was there.
var authSchemes = []struct {
	name  string // lower case
	shape credentialShape
	// params are, for shapeParams, the parameters (lower case) that carry
	// the credential: a parameter list without any of them (a challenge,
	// "Digest algorithm=SHA-256 is the default") is no credential.
	params []string
}{
	{"bearer", shapeAny, nil},
	{"basic", shapeBasic, nil},
	{"digest", shapeParams, []string{"response"}},                          // RFC 7616
	{"negotiate", shapeOpaque, nil},                                        // RFC 4559
	{"ntlm", shapeOpaque, nil},                                             // RFC 4559
	{"dpop", shapeOpaque, nil},                                             // RFC 9449
	{"aws4-hmac-sha256", shapeParams, []string{"credential", "signature"}}, // AWS Signature Version 4
	{"hoba", shapeParams, []string{"result"}},                              // RFC 7486
	{"mutual", shapeParams, []string{"kc1", "ks1", "vkc", "vks"}},          // RFC 8120
	{"scram-sha-1", shapeParams, []string{"data"}},                         // RFC 7804
	{"scram-sha-256", shapeParams, []string{"data"}},                       // RFC 7804
	{"vapid", shapeParams, []string{"t", "k"}},                             // RFC 8292
	{"privatetoken", shapeParams, []string{"token"}},                       // RFC 9577
}

// matchScheme matches an authentication scheme's name at i followed by
// blanks and a credential of its shape; see matchSecret for the results.
func matchScheme(s string, i int) (start, end, resume int) {
	rest := s[i:]
	for _, n := range byFirst.schemes[s[i]] {
		sc := &authSchemes[n]
		if !hasPrefixFold(rest, sc.name) {
			continue
		}
		j := i + len(sc.name)
		k := skipBlanks(s, j)
		if k == j || k == len(s) {
			return 0, 0, 0
		}
		if strings.HasPrefix(s[k:], Redacted) {
			e := k + len(Redacted)
			return e, e, e
		}
		switch sc.shape {
		case shapeAny:
			return unquotedValue(s, k)
		case shapeBasic:
			e := token68End(s, k)
			raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s[k:e], "="))
			if err != nil || !strings.Contains(string(raw), ":") {
				return 0, 0, 0
			}
			return k, e, e
		case shapeOpaque:
			if e := token68End(s, k); e-k >= minOpaqueCredential && !wordShaped(s[k:e]) {
				return k, e, e
			}
		case shapeParams:
			if e, ok := authParams(s, k, sc.params); ok {
				return k, e, e
			}
		}
		return 0, 0, 0
	}
	return 0, 0, 0
}

// wordShaped reports whether t reads as words joined by '-', '.', '_' or
// '~' ("authentication-required", "Mutual-Auth"), each all lower case,
// capitalized or all upper case, with no digit: no base64 credential of
// minOpaqueCredential characters looks like that.
func wordShaped(t string) bool {
	for w := range strings.FieldsFuncSeq(t, func(r rune) bool { return strings.ContainsRune("-._~", r) }) {
		rest := w
		if isUpper(w[0]) {
			rest = w[1:]
		}
		lower, upper := true, true
		for i := 0; i < len(rest); i++ {
			lower = lower && isLower(rest[i])
			upper = upper && isUpper(rest[i])
		}
		if !lower && !upper {
			return false
		}
	}
	return true
}

// authParams reads the auth-param list at k (RFC 9110 §11.2: name=value or
// name="quoted value", also with JSON-escaped quotes, separated by commas
// and blanks). It returns the end of the list and whether it holds a
// non-empty value of one of params.
func authParams(s string, k int, params []string) (end int, ok bool) {
	for {
		ne := tokenEnd(s, k)
		if ne == k {
			return end, ok
		}
		name := s[k:ne]
		v := skipBlanks(s, ne)
		if v >= len(s) || s[v] != '=' {
			return end, ok
		}
		v = skipBlanks(s, v+1)
		ve := paramValueEnd(s, v)
		if ve < 0 {
			return end, ok
		}
		if val := s[v:ve]; !ok && val != "" && val != `""` && val != `\"\"` {
			for _, p := range params {
				if strings.EqualFold(name, p) {
					ok = true
				}
			}
		}
		end = ve
		c := skipBlanks(s, ve)
		if c >= len(s) || s[c] != ',' {
			return end, ok
		}
		k = skipBlanks(s, c+1)
	}
}

// paramValueEnd returns the end of the auth-param value at v: a quoted
// string ("...", with quoted-pairs such as \", or, JSON-escaped, \"...\"),
// or a run of bytes up to a
// blank, a comma, a semicolon, a quote, a backslash or a line end (a
// token68 or AWS's Credential=AKIA.../aws4_request). It returns -1 for a
// quoted string that is not closed on its line. A '"' followed by JSON
// punctuation (`response=","b":1`) ends a JSON string rather than opening
// a value, and a JSON-escaped value never runs past the end of the JSON
// string that holds it, so that a replacement keeps JSON valid.
func paramValueEnd(s string, v int) int {
	switch {
	case v < len(s) && s[v] == '"':
		if c := skipBlanks(s, v+1); c < len(s) && strings.IndexByte(",:]}", s[c]) >= 0 {
			return -1
		}
		for e := v + 1; e < len(s); e++ {
			switch s[e] {
			case '"':
				return e + 1
			case '\n', '\r':
				return -1
			case '\\':
				if e+1 < len(s) && (s[e+1] == '\n' || s[e+1] == '\r') {
					return -1
				}
				e++ // a quoted-pair ("\"") is kept whole
			}
		}
		return -1
	case strings.HasPrefix(s[v:], `\"`):
		for e := v + 2; e < len(s); e++ {
			switch s[e] {
			case '"', '\n', '\r':
				return -1
			case '\\':
				if e+1 < len(s) && s[e+1] == '"' {
					return e + 2
				}
				e++ // an escape is kept whole
			}
		}
		return -1
	}
	e := v
	for e < len(s) && strings.IndexByte(" \t,;\"'\\\n\r", s[e]) < 0 {
		e++
	}
	return e
}

// token68End returns the end of the token68 (RFC 9110 §11.2) at k: letters,
// digits, "-._~+/", then any '='.
func token68End(s string, k int) int {
	for k < len(s) && (isAlnum(s[k]) || strings.IndexByte("-._~+/", s[k]) >= 0) {
		k++
	}
	for k < len(s) && s[k] == '=' {
		k++
	}
	return k
}

// tokenEnd returns the end of the run of token bytes at k.
func tokenEnd(s string, k int) int {
	for k < len(s) && isTokenByte(s[k]) {
		k++
	}
	return k
}

// headerValueEnd returns the end of the header value that starts at k: a
// line end (also JSON-escaped: \n, \r) or the end of the JSON string that
// holds it (an unescaped '"', or an escaped one inside a JSON string). A
// quoted parameter (name="..." or, JSON-escaped, name=\"...\") is skipped
// whole, so that Digest's quoted response is inside the value. In a JSON
// text (js, see jsonText), an unescaped '"' is always the end of the JSON
// string, and so of the value: it opens no parameter, and a JSON-escaped
// parameter not closed before it ends there.
func headerValueEnd(s string, k int, js *jsonText) int {
	for k < len(s) {
		switch c := s[k]; {
		case c == '\n' || c == '\r' || c == '"':
			return k
		case c == '=' && js != nil && strings.HasPrefix(s[k+1:], `\"`):
			e, closed := escapedParamEnd(s, k+3)
			if !closed {
				js.mark()
			}
			k = e
		case c == '=' && k+1 < len(s) && s[k+1] == '"' && !js.mark():
			q := strings.IndexAny(s[k+2:], "\"\n\r\\")
			if q < 0 || s[k+2+q] != '"' {
				return k + 1
			}
			k += 2 + q + 1
		case c == '=' && strings.HasPrefix(s[k+1:], `\"`):
			q := strings.Index(s[k+3:], `\"`)
			if q < 0 {
				return k + 1
			}
			k += 3 + q + 2
		case c == '\\':
			if k+1 >= len(s) || s[k+1] == 'n' || s[k+1] == 'r' || s[k+1] == '"' || s[k+1] == '\n' {
				return k
			}
			k += 2 // an escape is kept whole
		default:
			k++
		}
	}
	return k
}

// escapedParamEnd returns the end of a JSON-escaped quoted parameter or
// string whose content starts at k, inside a JSON string: just after its
// closing \" (closed), or at the unescaped '"' that ends the string when
// that comes first. Escapes are read whole, so the '"' of an escaped
// backslash ("\\"") is the string's end, and a quote escaped once more
// (\\\") is inside the content.
func escapedParamEnd(s string, k int) (end int, closed bool) {
	for k < len(s) {
		switch s[k] {
		case '"':
			return k, false
		case '\\':
			r := backslashRun(s, k)
			if k+r < len(s) && s[k+r] == '"' {
				switch {
				case r%2 == 0:
					return k + r, false
				case r == 1:
					return k + 2, true
				}
				r++
			}
			k += r
		default:
			k++
		}
	}
	return len(s), false
}
