package sanitize

// edits is a copy of s in the making, with some of its spans replaced. It
// copies nothing until the first replacement, and String returns s itself
// when there was none: the sanitizers return their input unchanged, and
// unallocated, when it holds nothing to remove. Spans are replaced in
// order, each at or after the end of the one before.
type edits struct {
	s    string
	out  []byte
	last int // where the text not copied yet begins
}

// replace writes s[start:end] as the concatenation of with.
func (e *edits) replace(start, end int, with ...string) {
	if e.out == nil {
		e.out = make([]byte, 0, len(e.s)+len(Redacted))
	}
	e.out = append(e.out, e.s[e.last:start]...)
	for _, w := range with {
		e.out = append(e.out, w...)
	}
	e.last = end
}

// String returns s with the replacements.
func (e *edits) String() string {
	if e.out == nil {
		return e.s
	}
	return string(append(e.out, e.s[e.last:]...))
}
