package sanitize

import (
	"encoding/base64"
	"strings"
)

// minOpaqueCredential is the shortest token68 taken for the credential of
// an opaque scheme (Negotiate, NTLM, DPoP). Real ones are 40 characters
// or more; 16 keeps ordinary words after the scheme name ("Negotiate
// authentication") as they are.
const minOpaqueCredential = 16

// credentialShape says what follows an HTTP authentication scheme's name
// when it is a credential, and so how much of it is replaced.
type credentialShape int

const (
	// shapeAny: any value is the credential (Bearer).
	shapeAny credentialShape = iota
	// shapeBasic: a token68 that decodes to user:password (RFC 7617).
	shapeBasic
	// shapeOpaque: a token68 of at least minOpaqueCredential characters.
	shapeOpaque
	// shapeParams: auth-params (name=value, ...): the rest of the header
	// value is replaced, quoted parameters included (Digest's response,
	// AWS Signature Version 4's Credential and Signature).
	shapeParams
)

// authSchemes are the HTTP authentication schemes (the IANA registry and
// AWS's) whose credentials Text replaces wherever they appear: in an
// Authorization header line, a JSON value, an error text. The scheme name
// stays, so a reader still sees which kind of credential was there.
var authSchemes = []struct {
	name  string // lower case
	shape credentialShape
}{
	{"bearer", shapeAny},
	{"basic", shapeBasic},
	{"digest", shapeParams},
	{"negotiate", shapeOpaque},
	{"ntlm", shapeOpaque},
	{"dpop", shapeOpaque},
	{"aws4-hmac-sha256", shapeParams},
	{"hoba", shapeParams},
	{"mutual", shapeParams},
	{"scram-sha-1", shapeParams},
	{"scram-sha-256", shapeParams},
	{"vapid", shapeParams},
	{"privatetoken", shapeParams},
}

// matchScheme matches an authentication scheme's name at i followed by
// blanks and a credential of its shape; see matchSecret for the results.
func matchScheme(s string, i int) (start, end, resume int) {
	rest := s[i:]
	for _, sc := range authSchemes {
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
			if e := token68End(s, k); e-k >= minOpaqueCredential {
				return k, e, e
			}
		case shapeParams:
			if e := tokenEnd(s, k); e > k && e < len(s) && s[e] == '=' {
				e = headerValueEnd(s, k)
				return k, e, e
			}
		}
		return 0, 0, 0
	}
	return 0, 0, 0
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
// whole, so that Digest's quoted response is inside the value.
func headerValueEnd(s string, k int) int {
	for k < len(s) {
		switch c := s[k]; {
		case c == '\n' || c == '\r' || c == '"':
			return k
		case c == '=' && k+1 < len(s) && s[k+1] == '"':
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
