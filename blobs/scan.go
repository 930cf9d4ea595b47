package blobs

import (
	"bytes"
	"encoding/json"
)

// This file is a small structural JSON scanner. It finds byte ranges in a result that
// json.Valid has accepted, without building any value, so that untouched ranges can be copied
// to the output verbatim. On input that is not valid JSON it never reads out of bounds and
// never loops forever, but the ranges it returns are meaningless; Rewrite checks validity first.

// span is a half-open byte range [start, end) of the input. For a string it includes the quotes.
type span struct{ start, end int }

// ok reports whether the span was set (a value found).
func (s span) ok() bool { return s.end > s.start }

// skipWS returns the index of the first byte at or after i that is not JSON whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string literal whose opening quote is b[i].
func stringEnd(b []byte, i int) int {
	i++
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		q := i + j
		// The quote is escaped when an odd number of backslashes precede it.
		bs := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
	return len(b)
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return len(b)
	}
}

// objIter walks the members of one object. Start it with i at the opening brace.
type objIter struct {
	b       []byte
	i       int
	started bool
}

// next returns the next member's key (a string span) and value span; ok is false after the
// last member.
func (it *objIter) next() (key, val span, ok bool) {
	b := it.b
	if !it.started {
		it.started = true
		if it.i >= len(b) || b[it.i] != '{' {
			return span{}, span{}, false
		}
		it.i++
	}
	i := skipWS(b, it.i)
	if i < len(b) && b[i] == ',' {
		i = skipWS(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		it.i = len(b)
		return span{}, span{}, false
	}
	key = span{i, stringEnd(b, i)}
	i = skipWS(b, key.end)
	if i >= len(b) || b[i] != ':' {
		it.i = len(b)
		return span{}, span{}, false
	}
	i = skipWS(b, i+1)
	val = span{i, valueEnd(b, i)}
	if !val.ok() {
		it.i = len(b)
		return span{}, span{}, false
	}
	it.i = val.end
	return key, val, true
}

// arrIter walks the elements of one array. Start it with i at the opening bracket.
type arrIter struct {
	b       []byte
	i       int
	started bool
}

// next returns the next element's span; ok is false after the last element.
func (it *arrIter) next() (el span, ok bool) {
	b := it.b
	if !it.started {
		it.started = true
		if it.i >= len(b) || b[it.i] != '[' {
			return span{}, false
		}
		it.i++
	}
	i := skipWS(b, it.i)
	if i < len(b) && b[i] == ',' {
		i = skipWS(b, i+1)
	}
	if i >= len(b) || b[i] == ']' {
		it.i = len(b)
		return span{}, false
	}
	el = span{i, valueEnd(b, i)}
	if !el.ok() {
		it.i = len(b)
		return span{}, false
	}
	it.i = el.end
	return el, true
}

// isString reports whether s is a string literal.
func isString(b []byte, s span) bool {
	return s.ok() && b[s.start] == '"' && s.end-s.start >= 2
}

// body returns the bytes between the quotes of the string literal s.
func body(b []byte, s span) []byte {
	return b[s.start+1 : s.end-1]
}

// strEq reports whether the string literal s decodes to want. It allocates only when the
// literal contains escapes, which object keys and type names rarely do.
func strEq(b []byte, s span, want string) bool {
	if !isString(b, s) {
		return false
	}
	raw := body(b, s)
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == want
	}
	// An escape is at most 12 bytes for one character (a surrogate pair); longer cannot match.
	if len(raw) > 12*len(want) {
		return false
	}
	got, ok := decodeString(b, s)
	return ok && got == want
}

// decodeString returns the value of the string literal s.
func decodeString(b []byte, s span) (string, bool) {
	if !isString(b, s) {
		return "", false
	}
	raw := body(b, s)
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), true
	}
	var out string
	if err := json.Unmarshal(b[s.start:s.end], &out); err != nil {
		return "", false
	}
	return out, true
}
