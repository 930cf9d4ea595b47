package rawjson

import (
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
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, syntaxError(i, "unexpected end")
	}
	switch c := b[i]; {
	case c == '{':
		return scanObject(b, i, depth+1)
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == '"':
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

func scanObject(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errDepth
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, syntaxError(i, "expected a member name")
		}
		end, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, syntaxError(i, "expected ':'")
		}
		if i, err = scanValue(b, SkipSpace(b, i+1), depth); err != nil {
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

func scanArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errDepth
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanValue(b, i, depth); err != nil {
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
// the offset after the closing one. Runs of plain bytes are skipped eight at
// a time.
func scanString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		for j+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
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
		}
		j++
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 reports whether any of the eight bytes of x (read little-endian)
// may need the byte-wise scan: a '"', a '\\' or a control character. It has
// no false negatives; a false positive only costs the slow path for a
// byte.
func special8(x uint64) bool {
	quote := x ^ ('"' * ones)
	backslash := x ^ ('\\' * ones)
	// A byte is zero in v when (v-1) borrows into its high bit while v's own
	// high bit is clear; a byte is below 0x20 likewise for x-0x20.
	z := (quote - ones) & ^quote
	z |= (backslash - ones) & ^backslash
	z |= (x - 0x20*ones) & ^x
	return z&highs != 0
}

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
