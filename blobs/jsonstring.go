package blobs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// stringReader reads the value of a JSON string literal, un-escaping it on the fly, from the
// bytes between its quotes. It never copies the literal: runs without escapes are copied
// straight into the caller's buffer. Bytes that are not escapes pass through as they are.
// Escapes follow encoding/json: \uXXXX surrogate pairs combine, a lone surrogate becomes U+FFFD.
type stringReader struct {
	src     []byte
	esc     int // index in src of the next backslash, len(src) when none; valid when known
	known   bool
	pending [utf8.UTFMax]byte
	pp, np  int // pending[pp:np] is decoded output not yet returned
	off     int // bytes of the original literal consumed, for error messages
	err     error
}

func newStringReader(raw []byte) *stringReader { return &stringReader{src: raw} }

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
		// Search for the next backslash once, not on every call: the run before it may be
		// megabytes long and is returned a buffer at a time.
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
			r.err = fmt.Errorf("bad escape at byte %d of a string: %w", r.off, ErrMalformedResult)
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

// decodeEscape decodes the escape sequence at the start of s (s[0] == '\\') and returns the
// character and the number of bytes consumed; size 0 means a malformed escape.
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

// hex4 parses four hex digits.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// padGuard passes base64 text through and fails once any character other than '=' or a line
// break follows a '='. encoding/base64's streaming decoder decodes its input in chunks and would
// otherwise accept padding in the middle ("QQ==QQ==") when a chunk ends right after it; with
// the guard, the stream accepts exactly what base64.StdEncoding.DecodeString accepts.
type padGuard struct {
	r      io.Reader
	padded bool
	off    int64
}

// Read implements io.Reader.
func (g *padGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	for i, c := range p[:n] {
		switch {
		case c == '=':
			g.padded = true
		case c == '\r' || c == '\n':
		case g.padded:
			return i, base64.CorruptInputError(g.off + int64(i))
		}
	}
	g.off += int64(n)
	return n, err
}

// invalidReader marks every failure of the decoding chain as ErrInvalidBase64, so that the
// copy loop can tell a bad blob from a failing disk.
type invalidReader struct{ r io.Reader }

// Read implements io.Reader.
func (v invalidReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", ErrInvalidBase64, err)
	}
	return n, err
}

// newBlobReader returns a reader of the decoded bytes of the base64 text held in the JSON
// string literal body raw (the bytes between the quotes). Any decoding failure wraps
// ErrInvalidBase64.
func newBlobReader(raw []byte) io.Reader {
	return invalidReader{base64.NewDecoder(base64.StdEncoding, &padGuard{r: newStringReader(raw)})}
}
