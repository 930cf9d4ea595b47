package rawjson

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// maxDepth bounds nesting so that a hostile document cannot exhaust the
// stack; encoding/json uses the same figure.
const maxDepth = 10000

var errDepth = errors.New("rawjson: exceeded max depth")

// syntaxError reports a malformed document at byte offset off.
func syntaxError(off int, what string) error {
	return fmt.Errorf("rawjson: invalid JSON at offset %d: %s", off, what)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first byte at or after i in b that
// is not JSON white space (space, tab, newline, carriage return).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanValue validates the JSON value starting at b[i] (no leading space)
// and returns the offset just after it. It is one pass with no allocation,
// which is what makes member lookups on large results cheap.
func scanValue(b []byte, i, depth int) (int, error) { return skipValue(b, i, depth, false) }

// skipValue is scanValue that, when lax, delimits strings without checking
// what is between their quotes (see laxString).
func skipValue(b []byte, i, depth int, lax bool) (int, error) {
	if i >= len(b) {
		return 0, syntaxError(i, "unexpected end")
	}
	switch c := b[i]; {
	case c == '{':
		if depth >= maxDepth {
			return 0, errDepth
		}
		return walkObject(b, SkipSpace(b, i+1), depth+1, lax, nil)
	case c == '[':
		if depth >= maxDepth {
			return 0, errDepth
		}
		return walkArray(b, SkipSpace(b, i+1), depth+1, lax, nil)
	case c == '"':
		if lax {
			return laxString(b, i)
		}
		return scanString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return 0, syntaxError(i, "unexpected character")
}

// walkObject is the one walk over the members of an object, from offset i,
// just after its opening brace and the white space after it, to its closing
// brace; it returns the offset after that. With v nil each member's value
// is validated (skipValue at depth); else it goes to v's callback, which
// says where it ends. The validating walk is every scan's inner loop, so
// the callbacks sit in a struct that is one nil test away.
func walkObject(b []byte, i, depth int, lax bool, v *memberVisit) (int, error) {
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, syntaxError(i, "expected a member name")
		}
		start := i
		end, err := stringEnd(b, i, lax)
		if err != nil {
			return 0, err
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, syntaxError(i, "expected ':'")
		}
		vs := SkipSpace(b, i+1)
		switch {
		case v == nil:
			i, err = skipValue(b, vs, depth, lax)
		case v.byName != nil:
			i, err = v.byName(b[start:end], vs)
		default:
			key, kerr := memberKey(b[start:end])
			if kerr != nil {
				return 0, fmt.Errorf("rawjson: member name: %w", kerr)
			}
			i, err = v.byKey(key, start, vs)
		}
		if err != nil {
			return 0, err
		}
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		return 0, syntaxError(i, "expected ',' or '}'")
	}
}

// memberVisit is a Reader's callback for each member of an object: byName
// (Reader.Fields) when set, else byKey (Reader.Object).
type memberVisit struct {
	byKey  func(key string, start, vs int) (int, error)
	byName func(name []byte, vs int) (int, error)
}

// walkArray is the one walk over the elements of an array, from offset i,
// just after its opening bracket and the white space after it, to its
// closing bracket; it returns the offset after that. Each element is
// validated (skipValue at depth) when fn is nil, else passed to fn with its
// offset, which says where it ends.
func walkArray(b []byte, i, depth int, lax bool, fn func(vs int) (int, error)) (int, error) {
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if fn != nil {
			i, err = fn(i)
		} else {
			i, err = skipValue(b, i, depth, lax)
		}
		if err != nil {
			return 0, err
		}
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		return 0, syntaxError(i, "expected ',' or ']'")
	}
}

// scanString validates a string starting at its opening quote and returns
// the offset after the closing one. The bytes are read a word (eight) at a
// time, which ends most strings within a few words; past 64 plain bytes the
// closing quote is searched for with bytes.IndexByte (vectorized) and the
// run before it checked eight bytes at a time (plainPrefix), so a long
// string costs little more than finding its end. The byte-wise steps see
// only the escapes, and say where the first invalid byte is.
func scanString(b []byte, i int) (int, error) {
	j := i + 1
	q := -1 // the next quote at or after j, once known (q >= j); len(b) when none
	for {
		k := 0
		for ; k < 8 && j+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[j:])); k++ {
			j += 8
		}
		if k == 8 {
			if q < j {
				q = len(b)
				if n := bytes.IndexByte(b[j:], '"'); n >= 0 {
					q = j + n
				}
			}
			j += plainPrefix(b[j:q])
		} else {
			for end := min(j+8, len(b)); j < end && b[j] >= 0x20 && b[j] != '"' && b[j] != '\\'; j++ {
			}
		}
		if j >= len(b) {
			return 0, syntaxError(len(b), "unterminated string")
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			j++
			if j >= len(b) {
				return 0, syntaxError(j, "unterminated escape")
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					return 0, syntaxError(j, "invalid \\u escape")
				}
				j += 4
			default:
				return 0, syntaxError(j, "invalid escape")
			}
		case c < 0x20:
			return 0, syntaxError(j, "control character in string")
		default:
			continue // eight plain bytes read one by one after a word special8 flagged
		}
		j++
	}
}

// stringEnd is scanString, or laxString when lax.
func stringEnd(b []byte, i int, lax bool) (int, error) {
	if lax {
		return laxString(b, i)
	}
	return scanString(b, i)
}

// laxString returns the offset after the closing quote of the string
// starting at b[i], checking nothing between the quotes: the closing quote
// is the first one after an even number of backslashes. On a valid
// document it is where scanString ends, at the cost of finding quotes.
func laxString(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		q := nextQuote(b, j)
		if q < 0 {
			return 0, syntaxError(len(b), "unterminated string")
		}
		n := 0 // backslashes before the quote
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// nextQuote returns the offset of the first '"' at or after j, or -1: a
// word at a time for 64 bytes, which is where most strings end, then
// bytes.IndexByte.
func nextQuote(b []byte, j int) int {
	for end := min(j+64, len(b)); j+8 <= end; j += 8 {
		x := binary.LittleEndian.Uint64(b[j:]) ^ ('"' * ones)
		if (x-ones)&^x&highs != 0 {
			break
		}
	}
	for end := min(j+8, len(b)); j < end; j++ {
		if b[j] == '"' {
			return j
		}
	}
	if n := bytes.IndexByte(b[j:], '"'); n >= 0 {
		return j + n
	}
	return -1
}

// plainPrefix returns the length of the longest prefix of s holding no
// backslash and no control character: 32 bytes a step while none of them
// is one, then eight, then byte by byte to the exact offset.
func plainPrefix(s []byte) int {
	k := 0
	for len(s)-k >= 32 {
		w := s[k : k+32]
		m := escapeOrControl8(binary.LittleEndian.Uint64(w)) | escapeOrControl8(binary.LittleEndian.Uint64(w[8:])) |
			escapeOrControl8(binary.LittleEndian.Uint64(w[16:])) | escapeOrControl8(binary.LittleEndian.Uint64(w[24:]))
		if m != 0 {
			break
		}
		k += 32
	}
	for len(s)-k >= 8 && escapeOrControl8(binary.LittleEndian.Uint64(s[k:])) == 0 {
		k += 8
	}
	for k < len(s) && s[k] >= 0x20 && s[k] != '\\' {
		k++
	}
	return k
}

// escapeOrControl8 is non-zero when one of the eight bytes of x (read
// little-endian) may be a backslash or a control character. It has no
// false negatives; a false positive only sends a word to the byte-wise
// loop. A byte is zero in v when (v-1) borrows into its high bit while v's
// own high bit is clear; a byte is below 0x20 likewise for x-0x20.
func escapeOrControl8(x uint64) uint64 {
	backslash := x ^ ('\\' * ones)
	return ((backslash-ones)&^backslash | (x-0x20*ones)&^x) & highs
}

// special8 reports whether any of the eight bytes of x (read little-endian)
// may be a '"', a '\\' or a control character, with no false negatives.
func special8(x uint64) bool {
	quote := x ^ ('"' * ones)
	return (quote-ones)&^quote&highs|escapeOrControl8(x) != 0
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber validates a number by the JSON grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, syntaxError(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, syntaxError(start, "invalid number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, syntaxError(start, "invalid number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, syntaxError(i, "invalid literal")
	}
	return i + len(lit), nil
}

// memberKey decodes a member name from its quoted bytes; names without
// escapes (nearly all) are read without decoding.
func memberKey(quoted []byte) (string, error) {
	inner := quoted[1 : len(quoted)-1]
	for _, c := range inner {
		if c == '\\' || c >= 0x80 {
			return Unquote(quoted)
		}
	}
	return knownKey(inner), nil
}

// knownKey returns the member names of JSON-RPC and MCP envelopes as
// constants, so that reading a message's envelope allocates no key
// strings; any other name is copied.
func knownKey(b []byte) string {
	switch string(b) { // compiled to comparisons: no allocation
	case "jsonrpc":
		return "jsonrpc"
	case "id":
		return "id"
	case "method":
		return "method"
	case "params":
		return "params"
	case "result":
		return "result"
	case "error":
		return "error"
	case "name":
		return "name"
	case "arguments":
		return "arguments"
	case "_meta":
		return "_meta"
	case "progressToken":
		return "progressToken"
	case "content":
		return "content"
	case "type":
		return "type"
	case "text":
		return "text"
	case "isError":
		return "isError"
	case "structuredContent":
		return "structuredContent"
	}
	return string(b)
}
