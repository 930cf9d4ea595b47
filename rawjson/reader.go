package rawjson

import "fmt"

// Reader reads one JSON document in a single pass for a decoder that
// descends into the members it wants: Object hands each member's value to
// a callback, which reads it with a nested Object, with Skip, or itself,
// and says where it ends. Every byte is validated once, however deep the
// decoder goes; picking members level by level (Pick on an object, then
// Pick on a value it returned) validates a value once per level above it.
// The nesting limit is the scanner's, counted from the document's top.
type Reader struct {
	b     []byte
	depth int
}

// NewReader returns a Reader of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Bytes returns the document.
func (r *Reader) Bytes() []byte { return r.b }

// Object reads the object at offset i (white space before it is skipped)
// and calls fn once per member, in document order, with the member's key,
// the offset of the key's opening quote and the offset of its value (no
// white space before it). fn reads the value and returns the offset just
// after it, or an error, which Object returns as it is. Object returns the
// offset just after the object's closing brace. A value that is not an
// object is ErrNotObject.
func (r *Reader) Object(i int, fn func(key string, start, vs int) (int, error)) (int, error) {
	b := r.b
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, ErrNotObject
	}
	if r.depth++; r.depth > maxDepth {
		return 0, errDepth
	}
	defer func() { r.depth-- }()
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, syntaxError(i, "expected a member name")
		}
		start := i
		end, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		key, err := memberKey(b[start:end])
		if err != nil {
			return 0, fmt.Errorf("rawjson: member name: %w", err)
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, syntaxError(i, "expected ':'")
		}
		if i, err = fn(key, start, SkipSpace(b, i+1)); err != nil {
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

// Skip validates the value at offset i (no white space before it) and
// returns the offset just after it.
func (r *Reader) Skip(i int) (int, error) {
	return scanValue(r.b, i, r.depth)
}

// End reports whether only white space follows offset i: the document is
// one value.
func (r *Reader) End(i int) error {
	return trailing(r.b, i)
}
