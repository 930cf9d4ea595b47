package rawjson

import "fmt"

// Reader reads one JSON document in a single pass for a decoder that
// descends into the members it wants: Object (or Fields) hands each
// member's value to a callback, and Array each element's, which reads it
// with a nested Object, Fields or Array, with Skip, or by its first byte
// alone, and says where it ends. Every byte is validated once, however deep
// the decoder goes; picking members level by level (Pick on an object, then
// Pick on a value it returned) validates a value once per level above it.
// The nesting limit is the scanner's, counted from the document's top.
type Reader struct {
	b     []byte
	depth int
	lax   bool
}

// NewReader returns a Reader of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// NewLaxReader returns a Reader of b, a document a validating read has
// already accepted (a value of a message ParseMessage returned): it checks
// the structure as NewReader's does, but finds where a string ends without
// checking what is between its quotes (escapes, control characters), which
// on a long string is most of the cost. A string it delimits is valid only
// if b is; on any input it ends and never reads out of bounds.
func NewLaxReader(b []byte) *Reader { return &Reader{b: b, lax: true} }

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
	return r.object(i, fn, nil)
}

// Fields is Object for a decoder that compares member names (Equal) or
// copies them (AppendUnquoted) without a string per member: fn gets each
// name as its JSON string literal, quotes included, undecoded.
func (r *Reader) Fields(i int, fn func(name []byte, vs int) (int, error)) (int, error) {
	return r.object(i, nil, fn)
}

// object is Object when byKey is set, else Fields with byName.
func (r *Reader) object(i int, byKey func(key string, start, vs int) (int, error), byName func(name []byte, vs int) (int, error)) (int, error) {
	b := r.b
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, ErrNotObject
	}
	if r.depth >= maxDepth {
		return 0, errDepth
	}
	r.depth++
	end, err := r.members(SkipSpace(b, i+1), byKey, byName)
	r.depth--
	return end, err
}

// members reads the members of an object from offset i, just after its
// opening brace and the white space after it, to its closing brace.
func (r *Reader) members(i int, byKey func(key string, start, vs int) (int, error), byName func(name []byte, vs int) (int, error)) (int, error) {
	b := r.b
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, syntaxError(i, "expected a member name")
		}
		start := i
		end, err := stringEnd(b, i, r.lax)
		if err != nil {
			return 0, err
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, syntaxError(i, "expected ':'")
		}
		vs := SkipSpace(b, i+1)
		if byKey != nil {
			key, kerr := memberKey(b[start:end])
			if kerr != nil {
				return 0, fmt.Errorf("rawjson: member name: %w", kerr)
			}
			i, err = byKey(key, start, vs)
		} else {
			i, err = byName(b[start:end], vs)
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

// Array reads the array at offset i (white space before it is skipped) and
// calls fn once per element, in order, with the offset of its value (no
// white space before it). fn reads the value and returns the offset just
// after it, or an error, which Array returns as it is. Array returns the
// offset just after the closing bracket. A value that is not an array is
// ErrNotArray.
func (r *Reader) Array(i int, fn func(vs int) (int, error)) (int, error) {
	b := r.b
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return 0, ErrNotArray
	}
	if r.depth >= maxDepth {
		return 0, errDepth
	}
	r.depth++
	end, err := r.elements(SkipSpace(b, i+1), fn)
	r.depth--
	return end, err
}

// elements reads the elements of an array from offset i, just after its
// opening bracket and the white space after it, to its closing bracket.
func (r *Reader) elements(i int, fn func(vs int) (int, error)) (int, error) {
	b := r.b
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = fn(i); err != nil {
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

// Skip validates the value at offset i (no white space before it) and
// returns the offset just after it.
func (r *Reader) Skip(i int) (int, error) {
	return skipValue(r.b, i, r.depth, r.lax)
}

// End reports whether only white space follows offset i: the document is
// one value.
func (r *Reader) End(i int) error {
	return trailing(r.b, i)
}
