package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
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
	c := newCanonParser(raw, s.members)
	at := rawjson.SkipSpace(raw, 0)
	if at >= len(raw) || raw[at] != '{' {
		return nil, "", "", fmt.Errorf("%w: a tool definition must be a JSON object", ErrBadDefinition)
	}
	var name string
	// Room for the values and the sorted copy of the outermost object.
	def, end, err := c.object(slices.Grow(s.buf[:0], 2*len(raw)+64), at, func(key, value []byte) bool {
		if string(value) == "null" || !isFingerprintField(key) {
			return false
		}
		if string(key) == "name" {
			name, _ = rawjson.Unquote(value) // not a string: ""
		}
		return true
	})
	if err == nil {
		err = c.end(end)
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
	c := newCanonParser(raw, make([]canonMember, 0, 32))
	out, end, err := c.value(make([]byte, 0, 2*len(raw)+64), rawjson.SkipSpace(raw, 0))
	if err == nil {
		err = c.end(end)
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

// canonParser reads one JSON value with a rawjson.Reader and writes its
// canonical form as it goes: keys sorted by their decoded bytes (the last
// of repeated keys wins), no white space, numbers as written, strings as
// encoding/json writes them without HTML escaping. It accepts what
// encoding/json's decoder accepts followed by nothing but white space,
// and writes what decoding with UseNumber and encoding the result would,
// without building the tree (FuzzCanonicalOracle holds it to that).
type canonParser struct {
	r     rawjson.Reader
	depth int
	// members are the members of the objects being read, innermost last.
	members []canonMember
}

func newCanonParser(src []byte, members []canonMember) canonParser {
	return canonParser{r: *rawjson.NewReader(src), members: members}
}

// end checks that nothing but white space follows the value, which ends at
// offset i.
func (c *canonParser) end(i int) error {
	if c.r.End(i) != nil {
		return errCanonSyntax
	}
	return nil
}

// canonError is the error of a read that failed with err: errCanonDeep as
// it is, any other (the reader's) errCanonSyntax.
func canonError(err error) error {
	if err == errCanonDeep {
		return err
	}
	return errCanonSyntax
}

// value appends the canonical form of the value at offset i to dst, and
// returns the offset after it.
func (c *canonParser) value(dst []byte, i int) ([]byte, int, error) {
	b := c.r.Bytes()
	if i < len(b) {
		switch b[i] {
		case '{':
			return c.object(dst, i, nil)
		case '[':
			return c.array(dst, i)
		}
	}
	end, err := c.r.Skip(i)
	if err != nil {
		return nil, 0, errCanonSyntax
	}
	if b[i] == '"' {
		return appendCanonString(dst, b[i:end]), end, nil
	}
	return append(dst, b[i:end]...), end, nil // a number as written, or a literal
}

// object appends the canonical form of the object at offset i. keep, when
// set, sees each member's key and canonical value after repeats are
// resolved, and drops the member by returning false.
func (c *canonParser) object(dst []byte, i int, keep func(key, value []byte) bool) ([]byte, int, error) {
	if c.depth++; c.depth > maxCanonFastDepth {
		return nil, 0, errCanonDeep
	}
	defer func() { c.depth-- }()
	mark := len(c.members)
	defer func() { c.members = c.members[:mark] }()
	base := len(dst)
	end, err := c.r.Fields(i, func(name []byte, vs int) (int, error) {
		key, plain := canonKey(name)
		start := len(dst)
		var end int
		var err error
		if dst, end, err = c.value(dst, vs); err != nil {
			return 0, err
		}
		c.members = append(c.members, canonMember{key, plain, start, len(dst)})
		return end, nil
	})
	if err != nil {
		return nil, 0, canonError(err)
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
	return dst[:base+n], end, nil
}

// canonMember is one member of an object being read: its key (decoded),
// and where its canonical value sits in the output. A plain key (see
// canonPlain) is the bytes between its quotes in the input, and is its
// own canonical form between quotes.
type canonMember struct {
	key        []byte
	plain      bool
	start, end int
}

func (c *canonParser) array(dst []byte, i int) ([]byte, int, error) {
	if c.depth++; c.depth > maxCanonFastDepth {
		return nil, 0, errCanonDeep
	}
	defer func() { c.depth-- }()
	dst = append(dst, '[')
	n := 0
	end, err := c.r.Array(i, func(vs int) (int, error) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		var end int
		var err error
		dst, end, err = c.value(dst, vs)
		return end, err
	})
	if err != nil {
		return nil, 0, canonError(err)
	}
	return append(dst, ']'), end, nil
}

// appendCanonString appends the canonical form of the string literal lit
// (valid: the reader checked it). A plain one (see canonPlain) is its own
// canonical form.
func appendCanonString(dst, lit []byte) []byte {
	if canonPlain(lit[1 : len(lit)-1]) {
		return append(dst, lit...)
	}
	s, _ := rawjson.Unquote(lit)
	return rawjson.AppendString(dst, s)
}

// canonKey returns a member name (a valid string literal): a plain one
// (see canonPlain) as the bytes between its quotes, which are its value,
// with plain true; any other decoded.
func canonKey(lit []byte) (key []byte, plain bool) {
	if inner := lit[1 : len(lit)-1]; canonPlain(inner) {
		return inner, true
	}
	s, _ := rawjson.Unquote(lit)
	return []byte(s), false
}

// canonPlain reports whether the content of a valid string literal is only
// printable ASCII other than the backslash (the reader has refused control
// characters, and a quote is escaped): its own value, and its own
// canonical form. Eight bytes are tested at a time: a byte is 0x80 or more
// when its high bit is set, and zero in x^'\\'-words when subtracting one
// borrows into a high bit that was clear.
func canonPlain(inner []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(inner) >= 8 {
		x := binary.LittleEndian.Uint64(inner)
		bs := x ^ ('\\' * ones)
		if (x|(bs-ones)&^bs)&highs != 0 {
			return false
		}
		inner = inner[8:]
	}
	for _, b := range inner {
		if b >= utf8.RuneSelf || b == '\\' {
			return false
		}
	}
	return true
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
