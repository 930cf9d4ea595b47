package rawjson

import "errors"

// ErrNotArray is returned when the input is not a JSON array.
var ErrNotArray = errors.New("rawjson: not a JSON array")

// Elements returns the elements of arr in order, each as the Span of its
// value in arr. Leading and trailing
// whitespace around the array is allowed; anything else after it is an
// error. The whole array is validated.
func Elements(arr []byte) ([]Span, error) {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, ErrNotArray
	}
	var out []Span
	end, err := walkArray(arr, SkipSpace(arr, i+1), 1, false, func(vs int) (int, error) {
		end, err := scanValue(arr, vs, 1)
		out = append(out, Span{Start: vs, End: end})
		return end, err
	})
	if err != nil {
		return nil, err
	}
	return out, trailing(arr, end)
}

// Span is a run of items of an object or array: the offset where the
// first begins and where the last ends (Member.Start and Member.ValueEnd,
// or an element's Span).
type Span struct {
	Start, End int
}

// Cut returns a copy of doc (an object or array whose items are spans, in
// order, as Members or Elements read them) without the items at the given
// indexes, every other byte as it was: a removed item takes its separating
// comma and the white space up to its neighbour with it. drop must be
// sorted and hold indexes of spans; doc is never modified.
func Cut(doc []byte, spans []Span, drop []int) []byte {
	if len(drop) == 0 {
		return doc
	}
	removed := make([]bool, len(spans))
	for _, i := range drop {
		removed[i] = true
	}
	out := make([]byte, 0, len(doc))
	pos := 0 // doc[:pos] is decided
	for i, s := range spans {
		if !removed[i] {
			continue
		}
		from, to := s.Start, s.End
		if next := nextKept(removed, i); next >= 0 {
			// Up to the next kept item: this item, its comma and the space
			// after it.
			to = spans[next].Start
		} else if prev := prevKept(removed, i); prev >= 0 {
			// No kept item follows: from the end of the previous kept one,
			// taking the comma before this item.
			from = spans[prev].End
		} else if i > 0 {
			// Nothing is kept: from where the first item began.
			from = spans[0].Start
		}
		from = max(from, pos) // an earlier item of the same run cut up to here
		out = append(out, doc[pos:from]...)
		pos = max(pos, to)
	}
	return append(out, doc[pos:]...)
}

// nextKept is the index of the first kept span after i, or -1.
func nextKept(removed []bool, i int) int {
	for j := i + 1; j < len(removed); j++ {
		if !removed[j] {
			return j
		}
	}
	return -1
}

// prevKept is the index of the last kept span before i, or -1.
func prevKept(removed []bool, i int) int {
	for j := i - 1; j >= 0; j-- {
		if !removed[j] {
			return j
		}
	}
	return -1
}
