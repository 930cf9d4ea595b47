package rawjson

import "unicode/utf8"

// replacement is U+FFFD REPLACEMENT CHARACTER in UTF-8.
const replacement = "\uFFFD"

// ValidUTF8 returns b itself when it is valid UTF-8, which costs one
// utf8.Valid pass and no copy. Otherwise it returns a copy of b in which
// every ill-formed sequence is replaced by U+FFFD, one per maximal subpart
// (the Unicode Standard's "U+FFFD substitution of maximal subparts", which
// the WHATWG Encoding Standard follows: "\xE2\x82" is one U+FFFD, "\xFF\xFE"
// two), and fixed reports the copy. Every other byte is kept: JSON text
// stays the same JSON, with the same escapes (an escaped lone surrogate
// such as \ud800 is ASCII, so valid UTF-8, and passes as it is).
//
// JSON text exchanged between systems must be UTF-8 (RFC 8259 §8.1); a peer
// that breaks this is repaired before its text reaches anyone else.
func ValidUTF8(b []byte) (out []byte, fixed bool) {
	if utf8.Valid(b) {
		return b, false
	}
	out = make([]byte, 0, len(b)+8)
	start := 0 // b[start:i] is valid and not yet copied
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 { // a literal U+FFFD is 3 bytes
			i += size
			continue
		}
		out = append(append(out, b[start:i]...), replacement...)
		i += maximalSubpart(b[i:])
		start = i
	}
	return append(out, b[start:]...), true
}

// maximalSubpart returns the length of the ill-formed sequence at the start
// of b: its lead byte and the continuation bytes after it that could still
// have begun a well-formed sequence (Unicode Table 3-7), at least 1.
func maximalSubpart(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF) // the second byte's range
	var tail int                     // continuation bytes a well-formed sequence has
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		tail = 1
	case c == 0xE0:
		tail, lo = 2, 0xA0
	case c == 0xED:
		tail, hi = 2, 0x9F // no surrogates
	case c >= 0xE1 && c <= 0xEF:
		tail = 2
	case c == 0xF0:
		tail, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		tail = 3
	case c == 0xF4:
		tail, hi = 3, 0x8F // nothing past U+10FFFF
	default:
		return 1 // a continuation byte, C0, C1 or F5..FF: never a lead
	}
	n := 1
	for n <= tail && n < len(b) && b[n] >= lo && b[n] <= hi {
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}
