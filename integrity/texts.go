package integrity

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// maxTextDepth bounds the nesting the text walker follows. Real tool
// schemas nest a few dozen levels at most; a deeper object is reported as
// unreadable instead of being walked.
const maxTextDepth = 512

// errTooDeep is a tool object nested deeper than maxTextDepth.
var errTooDeep = errors.New("nested deeper than " + strconv.Itoa(maxTextDepth) + " levels")

// text is one string of a tool object that the scan reads: where it is,
// its value, and the byte range of its JSON string (quotes included) in the
// object, for strip to replace. schemaValue marks a value of a schema
// keyword (enum, const, default, examples): a value the tool accepts or
// returns, which strip must not change.
type text struct {
	where       string
	value       string
	start, end  int
	schemaValue bool
}

// scannedMember reports whether the string at a path of n elements, the
// first being first and the last last, is one the scan reads as prose: the
// tool's description and title, annotations.title, and every description
// and title inside inputSchema and outputSchema (parameter and property
// descriptions at any depth).
func scannedMember(n int, first, last []byte) bool {
	if string(last) != "description" && string(last) != "title" {
		return false
	}
	switch {
	case n == 1:
		return true
	case string(first) == "annotations":
		return n == 2 && string(last) == "title"
	case string(first) == "inputSchema" || string(first) == "outputSchema":
		// A property named "description" is an object under
		// properties; only string values reach here.
		return true
	}
	return false
}

// isValueKeyword reports whether a schema member holds values rather than
// schemas: every string in it, at any depth, is a value a model reads (an
// enum member, a default, an example) and can carry an instruction as
// well as a description can.
func isValueKeyword(key []byte) bool {
	switch string(key) {
	case "enum", "const", "default", "examples":
		return true
	}
	return false
}

// isNameMap reports whether a schema member maps property names (or
// definition names) to schemas: a key under it is a name, not a keyword,
// so a property called "default" is not a default value.
func isNameMap(key []byte) bool {
	switch string(key) {
	case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
		return true
	}
	return false
}

// collect returns the scanned strings of one tool object, in document
// order; nil when there are none. The object must be valid JSON (the
// upstream package read it so): the walker, a lax rawjson.Reader, checks
// the structure, numbers and literals, and decodes the strings it scans,
// but not the others, so other input gives an error or odd texts, never a
// panic. The texts' where and value are parts of one new string; the slice
// is the walker's, valid until its release.
func (w *walker) collect(obj []byte) ([]text, error) {
	w.path, w.elems, w.out, w.strs, w.sizes = w.path[:0], w.elems[:0], w.out[:0], w.strs[:0], w.sizes[:0]
	i := rawjson.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	w.r = *rawjson.NewLaxReader(obj)
	end, err := w.value(i, 0)
	if err != nil {
		return nil, err
	}
	if end = rawjson.SkipSpace(obj, end); end != len(obj) {
		return nil, fmt.Errorf("data after the object at offset %d", end)
	}
	if len(w.out) == 0 {
		return nil, nil
	}
	all := string(w.strs)
	for k := range w.out {
		t := &w.out[k]
		t.where, all = all[:w.sizes[2*k]], all[w.sizes[2*k]:]
		t.value, all = all[:w.sizes[2*k+1]], all[w.sizes[2*k+1]:]
	}
	return w.out, nil
}

// walker reads one tool object, following its keys, and records the
// scanned strings. Walkers are reused (walkers): the scan of a catalog
// allocated its path and texts per tool, most of the scan's garbage.
type walker struct {
	r rawjson.Reader
	// path is the path of the current value, its elements (keys and
	// "[n]" for array elements) joined with '.'; elems holds where each
	// element begins in it.
	path  []byte
	elems []int
	// out are the texts found so far, their where and value not yet
	// set: strs holds the where and value of each in turn, and sizes
	// their lengths, two per text.
	out   []text
	strs  []byte
	sizes []int
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// maxWalkerBytes and maxWalkerTexts bound the buffers a walker keeps for
// its next use: an unusually large tool does not pin its size in the pool.
const (
	maxWalkerBytes = 64 << 10
	maxWalkerTexts = 256
)

// maxWhere bounds the bytes of a text's where that a walker keeps, and
// maxScannedTexts the texts of one tool: each text keeps its own copy of
// its path, so without them a small hostile tool (an enum of 40,000
// members under 20 keys of 1,000 bytes: 176 KB, or 20,000 nested
// descriptions) made the walker copy gigabytes. With both, what a walk
// keeps is linear in its input. A tool with more scanned strings than any
// real one has is unreadable, which holds it under scan: quarantine rather
// than let an instruction hide past the limit.
const (
	maxWhere        = 160
	maxScannedTexts = 10000
	whereEllipsis   = "..."
	whereHeadLength = (maxWhere - len(whereEllipsis)) / 2
)

// appendWhere appends path to dst, or, when it is longer than maxWhere,
// its start and its end around an ellipsis, in maxWhere bytes. The cut
// may split a multi-byte character: where is only shown, sanitized.
func appendWhere(dst, path []byte) []byte {
	if len(path) <= maxWhere {
		return append(dst, path...)
	}
	dst = append(dst, path[:whereHeadLength]...)
	dst = append(dst, whereEllipsis...)
	return append(dst, path[len(path)-(maxWhere-whereHeadLength-len(whereEllipsis)):]...)
}

// release returns w to walkers; its texts are not to be used after.
func (w *walker) release() {
	clear(w.out[:cap(w.out)]) // the strings of this tool
	w.r = rawjson.Reader{}
	if cap(w.strs) > maxWalkerBytes || cap(w.path) > maxWalkerBytes || cap(w.out) > maxWalkerTexts {
		*w = walker{}
	}
	walkers.Put(w)
}

// push appends an element to the path; the caller writes its bytes.
func (w *walker) push() {
	if len(w.elems) > 0 {
		w.path = append(w.path, '.')
	}
	w.elems = append(w.elems, len(w.path))
}

// pop removes the last element of the path.
func (w *walker) pop() {
	start := w.elems[len(w.elems)-1]
	if len(w.elems) > 1 {
		start-- // its '.'
	}
	w.path = w.path[:start]
	w.elems = w.elems[:len(w.elems)-1]
}

// scanned reports whether the scan reads a string at the current path,
// and whether it reads it as a schema value (see text).
func (w *walker) scanned() (scanned, schemaValue bool) {
	n := len(w.elems)
	if n == 0 {
		return false, false
	}
	first := w.path
	if n > 1 {
		first = w.path[:w.elems[1]-1]
	}
	if scannedMember(n, first, w.path[w.elems[n-1]:]) {
		return true, false
	}
	if string(first) != "inputSchema" && string(first) != "outputSchema" {
		return false, false
	}
	// A value keyword anywhere below the schema root, unless it is a
	// name under properties and the like.
	for k := 1; k < n; k++ {
		if isValueKeyword(w.elem(k)) && !isNameMap(w.elem(k-1)) {
			return true, true
		}
	}
	return false, false
}

// elem returns the k-th element of the path.
func (w *walker) elem(k int) []byte {
	end := len(w.path)
	if k+1 < len(w.elems) {
		end = w.elems[k+1] - 1
	}
	return w.path[w.elems[k]:end]
}

// value reads the value at offset i, at depth levels below the tool
// object, and returns the offset after it.
func (w *walker) value(i, depth int) (int, error) {
	if depth > maxTextDepth {
		return 0, errTooDeep
	}
	b := w.r.Bytes()
	if i < len(b) {
		switch b[i] {
		case '{':
			return w.r.Fields(i, func(name []byte, vs int) (int, error) {
				w.push()
				var err error
				if w.path, err = appendString(w.path, name); err != nil {
					return 0, err
				}
				end, err := w.value(vs, depth+1)
				w.pop()
				return end, err
			})
		case '[':
			n := 0
			return w.r.Array(i, func(vs int) (int, error) {
				w.push()
				w.path = append(strconv.AppendInt(append(w.path, '['), int64(n), 10), ']')
				n++
				end, err := w.value(vs, depth+1)
				w.pop()
				return end, err
			})
		}
	}
	end, err := w.r.Skip(i)
	if err != nil || b[i] != '"' {
		return end, err
	}
	if scanned, schemaValue := w.scanned(); scanned {
		if len(w.out) == maxScannedTexts {
			return 0, fmt.Errorf("more than %d strings to scan", maxScannedTexts)
		}
		n := len(w.strs)
		w.strs = appendWhere(w.strs, w.path)
		where := len(w.strs) - n
		if w.strs, err = appendString(w.strs, b[i:end]); err != nil {
			return 0, err
		}
		w.sizes = append(w.sizes, where, len(w.strs)-n-where)
		w.out = append(w.out, text{start: i, end: end, schemaValue: schemaValue})
	}
	return end, nil
}

// decodeString decodes one JSON string literal (quotes included). Invalid
// UTF-8 becomes U+FFFD, as encoding/json decodes it, so that removing a
// character between two stray bytes can never join them into a new one.
func decodeString(lit []byte) (string, error) {
	s, err := rawjson.Unquote(lit)
	if err != nil {
		return "", fmt.Errorf("invalid JSON string: %v", err)
	}
	return s, nil
}

// appendString appends the value of the JSON string lit (quotes included)
// to dst, as decodeString returns it (rawjson.AppendUnquoted). On an error
// dst is returned as it was (the walker pops its path on the way out).
func appendString(dst, lit []byte) ([]byte, error) {
	dst, err := rawjson.AppendUnquoted(dst, lit)
	if err != nil {
		return dst, fmt.Errorf("invalid JSON string: %v", err)
	}
	return dst, nil
}
