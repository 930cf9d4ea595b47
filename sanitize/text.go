package sanitize

import (
	"strings"
	"unicode/utf8"
)

// Redacted is what every secret is replaced with.
const Redacted = "[REDACTED]"

// MaxErrorRunes bounds an error text sent downstream (seed: error details are
// cut to 500 characters), so that a chatty upstream cannot flood a model's
// context with one error. The count includes the closing ellipsis.
const MaxErrorRunes = 500

// ellipsis ends a text that Error cut.
const ellipsis = "…"

// Text returns s made safe for an error text or a log line:
//
//   - control characters other than '\n' and '\t' are removed (C0, DEL, C1;
//     an ANSI CSI sequence such as "\x1b[31m" is removed whole), as are
//     Unicode TAG characters; invalid UTF-8 becomes U+FFFD;
//   - in every URL ("scheme://..."), the query and fragment are dropped and a
//     user:password part becomes [Redacted]; scheme, host and path stay;
//   - well-known secret shapes become [Redacted]: tokens starting with sk-,
//     xoxb-, xoxp-, ghp_, gho_, ghu_, github_pat_ or AIza (at a word start,
//     followed by at least 6 token characters); the credential after an
//     HTTP authentication scheme's name (see authSchemes: Bearer, Basic,
//     Digest, Negotiate, NTLM, AWS4-HMAC-SHA256...; the name stays); the
//     value of the keys token, key, apikey, api_key, password, passwd,
//     passphrase, secret, authorization, cookie, credential and credentials
//     (case-insensitive, also as the last word of a longer key such as
//     access_token, x-api-key, proxy-authorization, set-cookie or the
//     camelCase accessToken and sessionCookie) in the
//     forms key=value, key="value", "key":"value", key: "value" and the
//     JSON-escaped \"key\":\"value\"; a JSON number, array or object
//     under such a key (but "key") becomes the string "[REDACTED]"; and the
//     whole value of an Authorization or Cookie header line.
//
// Text is idempotent: Text(Text(s)) == Text(s). It never returns a string
// longer than len(s) plus the markers it inserted, and it returns s itself
// (no allocation) when nothing needs to change. It reads s as plain text,
// where a quote after a key's '=' or ':' opens the value; inside a JSON
// string that quote may be the string's end, so a JSON line is scrubbed
// with Scrubber.LogLine, which keeps it valid with every member.
func Text(s string) string {
	s = clean(s)
	s = dropURLQueries(s)
	return redactSecrets(s)
}

// Error is Text followed by a cut to MaxErrorRunes runes: a longer text is
// cut on a rune boundary (never inside a [Redacted] marker) and ends with "…".
func Error(s string) string {
	t := Text(s)
	if len(t) <= MaxErrorRunes || utf8.RuneCountInString(t) <= MaxErrorRunes {
		return t
	}
	cut := 0
	for n := 0; n < MaxErrorRunes-1; n++ {
		_, size := utf8.DecodeRuneInString(t[cut:])
		cut += size
	}
	// Never leave half a marker: a later Text would take "[REDAC…" for a
	// value and the reader could not tell what was there.
	from := max(0, cut-len(Redacted)+1)
	to := min(len(t), cut+len(Redacted)-1)
	if i := strings.Index(t[from:to], Redacted); i >= 0 && from+i < cut {
		cut = from + i
	}
	return t[:cut] + ellipsis
}

// StripTags removes the Unicode TAG characters U+E0000..U+E007F from s. They
// render as nothing yet a model reads them, so an upstream could hide
// instructions in a tool description or a result. StripTags returns s itself
// when it holds none.
func StripTags(s string) string {
	// Every TAG character is encoded as F3 A0 80 80 .. F3 A0 81 BF.
	i := strings.Index(s, "\xf3\xa0")
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if isTag(r) {
			b.WriteString(s[last:i])
			last = i + size
		}
		i += size
		if j := strings.Index(s[i:], "\xf3\xa0"); j >= 0 {
			i += j
		} else {
			break
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

func isTag(r rune) bool { return r >= 0xE0000 && r <= 0xE007F }

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9F }

// dropASCII reports an ASCII control character that Text removes.
func dropASCII(c byte) bool { return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7F }

// clean removes control and TAG characters and replaces invalid UTF-8.
func clean(s string) string {
	i := firstUnclean(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == 0x1B:
				i = skipEscape(s, i)
			case dropASCII(c):
				i++
			default:
				b.WriteByte(c)
				i++
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// A run of invalid bytes becomes one U+FFFD.
			b.WriteRune(utf8.RuneError)
			for i++; i < len(s) && s[i] >= utf8.RuneSelf; {
				r, size := utf8.DecodeRuneInString(s[i:])
				if r != utf8.RuneError || size != 1 {
					break
				}
				i++
			}
		case isC1(r) || isTag(r):
			i += size
		default:
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	return b.String()
}

// asciiKept marks the ASCII bytes clean keeps: all but those of dropASCII
// and ESC. Bytes from 0x80 up are not marked; they start UTF-8 sequences.
var asciiKept = func() (t [256]bool) {
	for c := range utf8.RuneSelf {
		t[c] = !dropASCII(byte(c)) && c != 0x1B
	}
	return t
}()

// firstUnclean returns the index of the first byte clean must change, or -1.
func firstUnclean(s string) int {
	for i := 0; i < len(s); {
		if asciiKept[s[i]] {
			i++
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if dropASCII(c) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || isC1(r) || isTag(r) {
			return i
		}
		i += size
	}
	return -1
}

// skipEscape returns the index after the escape sequence starting with ESC at
// i: a whole CSI sequence (ESC '[' parameters intermediates final), or just
// the ESC byte when no complete CSI sequence follows.
func skipEscape(s string, i int) int {
	if i+1 >= len(s) || s[i+1] != '[' {
		return i + 1
	}
	j := i + 2
	for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3F {
		j++
	}
	for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2F {
		j++
	}
	if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7E {
		return j + 1
	}
	return i + 1
}
