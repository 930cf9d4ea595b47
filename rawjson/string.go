package rawjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// String encodes s as a JSON string without HTML escaping, the way most MCP
// servers write strings (encoding/json would turn '<' into \u003c).
func String(s string) []byte { return AppendString(nil, s) }

// AppendString appends s as a JSON string the way encoding/json does
// without HTML escaping: quote and backslash escaped, \b \f \n \r \t
// for those controls and \u00XX for the others, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 as \u2028 and \u2029, every other character as is.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(dst, s[start:]...), '"')
}

// Unquote returns the text of quoted, a JSON string value as Members, Get
// and Elements give it, decoded as encoding/json decodes it (escapes
// resolved, invalid UTF-8 replaced). A string without escapes, nearly
// every name and description, is copied without decoding. A value that is
// not a string is an error.
func Unquote(quoted []byte) (string, error) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", errors.New("rawjson: not a JSON string")
	}
	inner := quoted[1 : len(quoted)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 {
			plain = false
			break
		}
	}
	if plain && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err
}

// Equal reports whether the JSON string literal quoted (quotes included,
// as Fields gives a member name) decodes to s, as Unquote decodes it. A
// literal without escapes is compared as it is; one with escapes is
// decoded only when its length could spell s.
func Equal(quoted []byte, s string) bool {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return false
	}
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if string(inner) == s { // the literal is valid if s has no quote or control character
			return utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == '"' }) < 0
		}
		if utf8.Valid(inner) {
			return false
		}
	} else if len(inner) > 6*len(s) { // an escape is at most six bytes a byte of s
		return false
	}
	got, err := Unquote(quoted)
	return err == nil && got == s
}

// AppendUnquoted appends the value of the JSON string literal quoted to
// dst, decoded as Unquote decodes it: a plain literal (no escape, no
// control character, valid UTF-8) is copied without decoding. On an error
// dst is returned as it was.
func AppendUnquoted(dst, quoted []byte) ([]byte, error) {
	if len(quoted) >= 2 && quoted[0] == '"' && quoted[len(quoted)-1] == '"' {
		if inner := quoted[1 : len(quoted)-1]; plain(inner) {
			return append(dst, inner...), nil
		}
	}
	s, err := Unquote(quoted)
	if err != nil {
		return dst, err
	}
	return append(dst, s...), nil
}

// plain reports whether the content of a JSON string literal is its value:
// no escape, no control character, valid UTF-8. It reads eight bytes at a
// time, and checks the UTF-8 only of content with a byte of 0x80 or more.
func plain(inner []byte) bool {
	var high uint64
	i := 0
	for ; i+8 <= len(inner); i += 8 {
		x := binary.LittleEndian.Uint64(inner[i:])
		if special8(x) {
			return false
		}
		high |= x
	}
	for _, c := range inner[i:] {
		if c == '\\' || c < 0x20 || c == '"' {
			return false
		}
		high |= uint64(c)
	}
	return high&highs == 0 || utf8.Valid(inner)
}
