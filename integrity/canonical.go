package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// fingerprintFields are the members of a tool object that its fingerprint
// covers (docs/security.md#tool-integrity). Everything else (icons, _meta, unknown fields) may
// change without a rug pull being reported.
var fingerprintFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// isFingerprintField reports whether key is one of fingerprintFields.
func isFingerprintField(key []byte) bool {
	for _, f := range fingerprintFields {
		if string(key) == f {
			return true
		}
	}
	return false
}

// fingerprintPrefix names the hash in every fingerprint string.
const fingerprintPrefix = "sha256:"

// Definition is the canonical JSON of the fingerprinted members of one tool
// object: the members of fingerprintFields that are present and not null,
// keys sorted (by their UTF-8 bytes) at every depth, no insignificant
// whitespace, numbers exactly as the upstream wrote them, strings encoded
// the way encoding/json does without HTML escaping (so "\u0041" and "A"
// are one string). Two tool objects that differ only in layout, key order
// or string escapes have the same Definition.
type Definition []byte

// Canonicalize returns the Definition of a raw tool object and its
// fingerprint, "sha256:" followed by 64 hex digits of the SHA-256 of the
// Definition. raw is not modified. A raw value that is not a JSON object is
// an error.
func Canonicalize(raw []byte) (Definition, string, error) {
	def, fp, _, err := canonicalize(raw, "")
	return def, fp, err
}

// canonicalize is Canonicalize that also returns the tool's name ("" when
// it is not a string). When the fingerprint is recorded (a fingerprint the
// caller has on record), the Definition is not returned (nil): a caller
// that needs only the fingerprint is spared its copy.
func canonicalize(raw []byte, recorded string) (Definition, string, string, error) {
	s := scratchPool.Get().(*canonScratch)
	defer s.release()
	c := canonParser{src: raw, members: s.members}
	c.skipSpace()
	if c.i >= len(raw) || raw[c.i] != '{' {
		return nil, "", "", fmt.Errorf("%w: a tool definition must be a JSON object", ErrBadDefinition)
	}
	var name string
	// Room for the values and the sorted copy of the outermost object.
	def, err := c.object(slices.Grow(s.buf[:0], 2*len(raw)+64), func(key, value []byte) bool {
		if string(value) == "null" || !isFingerprintField(key) {
			return false
		}
		if string(key) == "name" {
			name, _ = rawjson.Unquote(value) // not a string: ""
		}
		return true
	})
	if err == nil {
		err = c.end()
	}
	s.members = c.members
	inScratch := err == nil
	switch {
	case errors.Is(err, errCanonDeep):
		def, name, err = canonicalizeTree(raw)
	case inScratch:
		s.buf = def
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: a tool definition must be a JSON object: %v", ErrBadDefinition, err)
	}
	fp := fingerprintOf(def, recorded)
	switch {
	case recorded != "" && fp == recorded:
		def = nil
	case inScratch:
		def = bytes.Clone(def) // its own size: the scratch is twice the input
	}
	return def, fp, name, nil
}

// canonScratch is the working memory of one canonicalize: the output
// buffer (values, then the sorted object) and the members being read.
// Fingerprinting every tool of a catalog allocated both per tool, most
// of a start's garbage.
type canonScratch struct {
	buf     []byte
	members []canonMember
}

var scratchPool = sync.Pool{New: func() any { return &canonScratch{members: make([]canonMember, 0, 32)} }}

// maxScratch and maxScratchMembers bound what is kept for the next use:
// an unusually large tool does not pin its size in the pool.
const (
	maxScratch        = 64 << 10
	maxScratchMembers = 1024
)

func (s *canonScratch) release() {
	if cap(s.buf) > maxScratch {
		s.buf = nil
	}
	if cap(s.members) > maxScratchMembers {
		s.members = make([]canonMember, 0, 32)
	}
	clear(s.members[:cap(s.members)]) // the keys of this tool
	s.buf, s.members = s.buf[:0], s.members[:0]
	scratchPool.Put(s)
}

// canonicalJSON re-encodes any JSON value canonically (used for stored
// definitions, which are already canonical once written, and to check
// them).
func canonicalJSON(raw []byte) ([]byte, error) {
	c := canonParser{src: raw, members: make([]canonMember, 0, 32)}
	out, err := c.value(make([]byte, 0, 2*len(raw)+64))
	if err == nil {
		err = c.end()
	}
	if errors.Is(err, errCanonDeep) {
		var v any
		if v, err = decodeNumbers(raw); err == nil {
			out = appendCanonical(make([]byte, 0, len(raw)), v)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// canonicalizeTree is canonicalize for deeply nested tool objects: it
// decodes the whole object into a tree and writes that.
func canonicalizeTree(raw []byte) (Definition, string, error) {
	v, err := decodeNumbers(raw)
	if err != nil {
		return nil, "", err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, "", errCanonSyntax
	}
	for k, e := range obj {
		if e == nil || !slices.Contains(fingerprintFields, k) {
			delete(obj, k)
		}
	}
	name, _ := obj["name"].(string)
	return slices.Clip(appendCanonical(make([]byte, 0, len(raw)), obj)), name, nil
}

// decodeNumbers decodes one JSON value keeping numbers as written, with
// nothing but white space after it.
func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errCanonSyntax
	}
	return v, nil
}

// appendCanonical writes v (maps, slices, strings, json.Number, bools and
// nil, as decodeNumbers makes them) the way canonParser writes the JSON it
// came from.
func appendCanonical(dst []byte, v any) []byte {
	switch v := v.(type) {
	case bool:
		return strconv.AppendBool(dst, v)
	case json.Number: // as the decoder read it, so valid
		return append(dst, v...)
	case string:
		return rawjson.AppendString(dst, v)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(append(rawjson.AppendString(dst, k), ':'), v[k])
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

// maxCanonFastDepth is how deeply canonParser lets objects and arrays
// nest. Each object is written once more when it closes, so the work grows
// with size times depth; past this depth (real tool schemas stay well
// within it) the input is decoded into a tree and written from that, in
// time linear in its size. encoding/json's own limit (10,000) then applies.
const maxCanonFastDepth = 16

var (
	// errCanonSyntax is any input that is not one JSON value.
	errCanonSyntax = errors.New("not valid JSON")
	// errCanonDeep is input nested deeper than maxCanonFastDepth.
	errCanonDeep = errors.New("nested too deeply for the one-pass parser")
)

// canonParser reads one JSON value and writes its canonical form as it
// goes: keys sorted by their decoded bytes (the last of repeated keys
// wins), no white space, numbers as written, strings as encoding/json
// writes them without HTML escaping. It accepts what encoding/json's
// decoder accepts followed by nothing but white space (the earlier code
// also let a stray ']' or '}' follow), and writes what decoding with
// UseNumber and encoding the result would, without building the tree
// (FuzzCanonicalOracle holds it to that).
type canonParser struct {
	src   []byte
	i     int
	depth int
	// members are the members of the objects being read, innermost last.
	members []canonMember
}

func (c *canonParser) skipSpace() { c.i = rawjson.SkipSpace(c.src, c.i) }

// end checks that nothing but white space follows the value.
func (c *canonParser) end() error {
	c.skipSpace()
	if c.i != len(c.src) {
		return errCanonSyntax
	}
	return nil
}

// value appends the canonical form of the value at c.i to dst.
func (c *canonParser) value(dst []byte) ([]byte, error) {
	c.skipSpace()
	if c.i >= len(c.src) {
		return nil, errCanonSyntax
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.object(dst, nil)
	case b == '[':
		return c.array(dst)
	case b == '"':
		return c.str(dst)
	case b == '-' || b >= '0' && b <= '9':
		return c.number(dst)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(c.src[c.i:], []byte(lit)) {
			c.i += len(lit)
			return append(dst, lit...), nil
		}
	}
	return nil, errCanonSyntax
}

// object appends the canonical form of the object at c.i. keep, when set,
// sees each member's key and canonical value after repeats are resolved,
// and drops the member by returning false.
func (c *canonParser) object(dst []byte, keep func(key, value []byte) bool) ([]byte, error) {
	if c.depth++; c.depth > maxCanonFastDepth {
		return nil, errCanonDeep
	}
	defer func() { c.depth-- }()
	c.i++ // {
	mark := len(c.members)
	defer func() { c.members = c.members[:mark] }()
	base := len(dst)
	c.skipSpace()
	if c.i < len(c.src) && c.src[c.i] == '}' {
		c.i++
		return append(dst, "{}"...), nil
	}
	for {
		c.skipSpace()
		if c.i >= len(c.src) || c.src[c.i] != '"' {
			return nil, errCanonSyntax
		}
		key, plain, err := c.key()
		if err != nil {
			return nil, err
		}
		c.skipSpace()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return nil, errCanonSyntax
		}
		c.i++
		start := len(dst)
		if dst, err = c.value(dst); err != nil {
			return nil, err
		}
		c.members = append(c.members, canonMember{key, plain, start, len(dst)})
		c.skipSpace()
		if c.i >= len(c.src) {
			return nil, errCanonSyntax
		}
		c.i++
		if c.src[c.i-1] == '}' {
			break
		}
		if c.src[c.i-1] != ',' {
			return nil, errCanonSyntax
		}
	}
	// The values sit after base in reading order: write the object sorted
	// after them, then move it down to base.
	ms := c.members[mark:]
	slices.SortStableFunc(ms, func(a, b canonMember) int { return bytes.Compare(a.key, b.key) })
	sorted := len(dst)
	dst = append(dst, '{')
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i+1].key, m.key) {
			continue // a later member of the same name wins
		}
		value := dst[m.start:m.end]
		if keep != nil && !keep(m.key, value) {
			continue
		}
		if len(dst) > sorted+1 {
			dst = append(dst, ',')
		}
		if m.plain {
			dst = append(append(append(dst, '"'), m.key...), '"', ':')
		} else {
			dst = append(rawjson.AppendString(dst, string(m.key)), ':')
		}
		dst = append(dst, dst[m.start:m.end]...)
	}
	dst = append(dst, '}')
	n := copy(dst[base:], dst[sorted:])
	return dst[:base+n], nil
}

// canonMember is one member of an object being read: its key (decoded),
// and where its canonical value sits in the output. A plain key (see
// plainString) is the bytes between its quotes in the input, and is its
// own canonical form between quotes.
type canonMember struct {
	key        []byte
	plain      bool
	start, end int
}

func (c *canonParser) array(dst []byte) ([]byte, error) {
	if c.depth++; c.depth > maxCanonFastDepth {
		return nil, errCanonDeep
	}
	defer func() { c.depth-- }()
	c.i++ // [
	dst = append(dst, '[')
	c.skipSpace()
	if c.i < len(c.src) && c.src[c.i] == ']' {
		c.i++
		return append(dst, ']'), nil
	}
	var err error
	for {
		if dst, err = c.value(dst); err != nil {
			return nil, err
		}
		c.skipSpace()
		if c.i >= len(c.src) {
			return nil, errCanonSyntax
		}
		c.i++
		switch c.src[c.i-1] {
		case ']':
			return append(dst, ']'), nil
		case ',':
			dst = append(dst, ',')
		default:
			return nil, errCanonSyntax
		}
	}
}

// str appends the canonical form of the string at c.i. A string of
// printable ASCII without escapes is its own canonical form.
func (c *canonParser) str(dst []byte) ([]byte, error) {
	start := c.i
	if end, ok := c.plainString(); ok {
		c.i = end
		return append(dst, c.src[start:end]...), nil
	}
	s, err := c.unquote()
	if err != nil {
		return nil, err
	}
	return rawjson.AppendString(dst, s), nil
}

// plainString reports the end (after the closing quote) of the string at
// c.i when it holds only printable ASCII other than the backslash.
func (c *canonParser) plainString() (int, bool) {
	for j := c.i + 1; j < len(c.src); j++ {
		switch b := c.src[j]; {
		case b == '"':
			return j + 1, true
		case b < 0x20 || b >= utf8.RuneSelf || b == '\\':
			return 0, false
		}
	}
	return 0, false
}

// key reads the member name at c.i: a plain one (see plainString) as the
// bytes between its quotes, which are its value, with plain true; any
// other decoded.
func (c *canonParser) key() (key []byte, plain bool, err error) {
	if end, ok := c.plainString(); ok {
		key = c.src[c.i+1 : end-1]
		c.i = end
		return key, true, nil
	}
	s, err := c.unquote()
	return []byte(s), false, err
}

// unquote reads a string at c.i that is not plain (see plainString) with
// rawjson.Unquote, which decodes as encoding/json does: bad escapes, lone
// surrogates and invalid UTF-8 included.
func (c *canonParser) unquote() (string, error) {
	j := c.i + 1
	for ; j < len(c.src) && c.src[j] != '"'; j++ {
		if c.src[j] == '\\' {
			j++
		}
	}
	if j >= len(c.src) {
		return "", errCanonSyntax
	}
	s, err := rawjson.Unquote(c.src[c.i : j+1])
	if err != nil {
		return "", errCanonSyntax
	}
	c.i = j + 1
	return s, nil
}

// number appends the number at c.i as written, after checking its syntax:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *canonParser) number(dst []byte) ([]byte, error) {
	start, src := c.i, c.src
	j := start
	digits := func() bool {
		k := j
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			j++
		}
		return j > k
	}
	if src[j] == '-' {
		j++
	}
	switch {
	case j < len(src) && src[j] == '0':
		j++
	case !digits():
		return nil, errCanonSyntax
	}
	if j < len(src) && src[j] == '.' {
		j++
		if !digits() {
			return nil, errCanonSyntax
		}
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		j++
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if !digits() {
			return nil, errCanonSyntax
		}
	}
	c.i = j
	return append(dst, src[start:j]...), nil
}

// fingerprintOf hashes a Definition.
func fingerprintOf(def []byte, known string) string {
	sum := sha256.Sum256(def)
	return fingerprintText(sum[:], known)
}

// fingerprintText is the fingerprint string of a SHA-256 sum, made in one
// allocation; or known, without one, when that is the string. A start
// fingerprints every tool and checks every pin, and nearly every result
// equals a fingerprint already held (the pin's): sharing it keeps one
// string per tool instead of two.
func fingerprintText(sum []byte, known string) string {
	var b [len(fingerprintPrefix) + 2*sha256.Size]byte
	n := copy(b[:], fingerprintPrefix)
	hex.Encode(b[n:], sum)
	if t := b[:n+2*len(sum)]; string(t) != known {
		return string(t)
	}
	return known
}

// ShortFingerprint is the first 12 hex digits of a fingerprint, for log
// lines and terminal output.
func ShortFingerprint(fp string) string {
	if len(fp) > len(fingerprintPrefix)+12 {
		return fp[:len(fingerprintPrefix)+12]
	}
	return fp
}

// pretty indents a Definition for people (tools diff).
func pretty(def []byte) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, def, "", "  "); err != nil {
		return def
	}
	return buf.Bytes()
}
