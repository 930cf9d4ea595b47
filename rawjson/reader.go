package rawjson

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
	return r.walk(i, '{', &memberVisit{byKey: fn}, nil)
}

// Fields is Object for a decoder that compares member names (Equal) or
// copies them (AppendUnquoted) without a string per member: fn gets each
// name as its JSON string literal, quotes included, undecoded.
func (r *Reader) Fields(i int, fn func(name []byte, vs int) (int, error)) (int, error) {
	return r.walk(i, '{', &memberVisit{byName: fn}, nil)
}

// Array reads the array at offset i (white space before it is skipped) and
// calls fn once per element, in order, with the offset of its value (no
// white space before it). fn reads the value and returns the offset just
// after it, or an error, which Array returns as it is. Array returns the
// offset just after the closing bracket. A value that is not an array is
// ErrNotArray.
func (r *Reader) Array(i int, fn func(vs int) (int, error)) (int, error) {
	return r.walk(i, '[', nil, fn)
}

// walk reads, one level deeper, the object (open '{') whose members go to
// members or the array ('[') whose elements go to elements, at offset i
// (white space before it is skipped).
func (r *Reader) walk(i int, open byte, members *memberVisit, elements func(vs int) (int, error)) (int, error) {
	b := r.b
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != open {
		if open == '{' {
			return 0, ErrNotObject
		}
		return 0, ErrNotArray
	}
	if r.depth >= maxDepth {
		return 0, errDepth
	}
	r.depth++
	var end int
	var err error
	if open == '{' {
		end, err = walkObject(b, SkipSpace(b, i+1), r.depth, r.lax, members)
	} else {
		end, err = walkArray(b, SkipSpace(b, i+1), r.depth, r.lax, elements)
	}
	r.depth--
	return end, err
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
