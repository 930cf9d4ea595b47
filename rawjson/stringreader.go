package rawjson

import (
	"bytes"
	"errors"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// NewStringReader returns a reader of the value of the JSON string literal
// quoted (quotes included, as Skip or Fields delimit it), decoded as it is
// read, for values too large to decode whole (a base64 blob of megabytes):
// runs without escapes are copied straight into the caller's buffer, and
// nothing else is allocated. Escapes are decoded as encoding/json decodes
// them (a surrogate pair is one character, a lone surrogate U+FFFD); every
// other byte passes as it is, invalid UTF-8 included. A malformed escape,
// or a literal without its quotes, is an error of the read that meets it.
func NewStringReader(quoted []byte) io.Reader {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return &stringReader{err: errors.New("rawjson: not a JSON string")}
	}
	return &stringReader{src: quoted[1 : len(quoted)-1]}
}

// stringReader reads the value of a string literal from src, the bytes
// between its quotes.
type stringReader struct {
	src     []byte
	esc     int // offset in src of the next backslash, len(src) when none; valid when known
	known   bool
	pending [utf8.UTFMax]byte
	pp, np  int // pending[pp:np] is decoded output not yet returned
	off     int // bytes of the literal's content consumed, for error messages
	err     error
}

// advance drops the first n bytes of src.
func (r *stringReader) advance(n int) {
	r.src = r.src[n:]
	r.off += n
	r.esc -= n
}

// Read implements io.Reader.
func (r *stringReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.pp < r.np {
			c := copy(p[n:], r.pending[r.pp:r.np])
			r.pp += c
			n += c
			continue
		}
		if len(r.src) == 0 || r.err != nil {
			break
		}
		// The next backslash is searched for once, not on every call: the
		// run before it may be megabytes long and is returned a buffer at a
		// time.
		if !r.known {
			r.esc = bytes.IndexByte(r.src, '\\')
			if r.esc < 0 {
				r.esc = len(r.src)
			}
			r.known = true
		}
		if r.esc > 0 {
			c := copy(p[n:], r.src[:r.esc])
			r.advance(c)
			n += c
			continue
		}
		rn, size := decodeEscape(r.src)
		if size == 0 {
			r.err = syntaxError(r.off+1, "invalid escape") // +1: the opening quote
			break
		}
		r.known = false
		r.advance(size)
		r.np = utf8.EncodeRune(r.pending[:], rn)
		r.pp = 0
	}
	if n > 0 || len(p) == 0 {
		return n, nil
	}
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}

// decodeEscape decodes the escape at the start of s (s[0] == '\\') and
// returns the character and the number of bytes it takes; size 0 means a
// malformed escape.
func decodeEscape(s []byte) (rune, int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r1, ok := hex4(s[2:])
		if !ok {
			return 0, 0
		}
		if !utf16.IsSurrogate(r1) {
			return r1, 6
		}
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if r2, ok := hex4(s[8:]); ok {
				if c := utf16.DecodeRune(r1, r2); c != utf8.RuneError {
					return c, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

// hex4 reads four hex digits.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		if !isHex(c) {
			return 0, false
		}
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
