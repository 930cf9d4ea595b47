package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ErrNotObject is returned when the input is not a JSON object.
var ErrNotObject = errors.New("rawjson: not a JSON object")

// Member is one top-level member of a JSON object, given as byte offsets
// into the object it was read from. Start is the offset of the key's opening
// quote; ValueStart and ValueEnd delimit the value.
type Member struct {
	Key        string
	Start      int
	ValueStart int
	ValueEnd   int
}

// Members returns the top-level members of obj in the order they appear.
// A duplicate key is reported once per occurrence. Leading and trailing
// whitespace around the object is allowed; anything else after it is an
// error.
func Members(obj []byte) ([]Member, error) {
	var out []Member
	err := walk(obj, func(m Member) bool {
		out = append(out, m)
		return true
	})
	return out, err
}

// EachMember calls fn with each top-level member of obj in the order they
// appear, as Members returns them, without making their slice; it stops
// when fn returns false. The whole object is validated, with the errors of
// Members, only when fn never stops the walk.
func EachMember(obj []byte, fn func(Member) bool) error { return walk(obj, fn) }

// Get returns the value of the first member named key, as a sub-slice of obj.
func Get(obj []byte, key string) (json.RawMessage, bool, error) {
	var found json.RawMessage
	ok := false
	err := walk(obj, func(m Member) bool {
		if m.Key == key {
			found, ok = obj[m.ValueStart:m.ValueEnd], true
			return false
		}
		return true
	})
	return found, ok, err
}

// Pick returns the values of the members of obj named names, in that
// order, as sub-slices of obj (nil for a member obj does not have). The
// whole object is validated. A named member given twice is a
// *DuplicateError: which one counts would be a guess, and parsers disagree
// (encoding/json takes the last).
func Pick(obj []byte, names ...string) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(names))
	dup := ""
	err := walk(obj, func(m Member) bool {
		i := slices.Index(names, m.Key)
		switch {
		case i < 0:
		case out[i] != nil:
			if dup == "" {
				dup = m.Key // reported once the whole object is validated
			}
		default:
			out[i] = obj[m.ValueStart:m.ValueEnd]
		}
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case dup != "":
		return nil, &DuplicateError{Name: dup}
	}
	return out, nil
}

// DuplicateError is Pick's error for a named member given twice. It is
// ErrDuplicateMember to errors.Is.
type DuplicateError struct{ Name string }

func (e *DuplicateError) Error() string { return fmt.Sprintf("member %q is given twice", e.Name) }

// Is reports whether target is ErrDuplicateMember.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicateMember }

// Flag reports whether obj is an object whose member key is true and given
// once: a flag given twice counts as unset, the conservative reading when
// a client may take the first and another the last.
func Flag(obj []byte, key string) bool {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	v, err := Pick(obj, key)
	return err == nil && string(v[0]) == "true"
}

// Set returns a copy of obj whose member key has value (which must be valid
// JSON). An existing member is replaced in place, keeping its position; a new
// member is appended at the end. obj is never modified.
func Set(obj []byte, key string, value []byte) ([]byte, error) {
	return SetMany(obj, KV{Key: key, Value: value})
}

// KV is one member for SetMany: its key and its value's JSON.
type KV struct {
	Key   string
	Value []byte
}

// SetMany is Set of several members in one walk of obj and one copy: the
// first member of each key is replaced in place, the keys obj lacks are
// appended at the end in the order given. A key given twice is an error.
// obj is never modified.
func SetMany(obj []byte, kvs ...KV) ([]byte, error) {
	for i, kv := range kvs {
		for _, other := range kvs[:i] {
			if other.Key == kv.Key {
				return nil, fmt.Errorf("rawjson: SetMany given member %q twice", kv.Key)
			}
		}
	}
	found := make([]Member, len(kvs)) // kvs[i]'s member; ValueEnd 0: none
	var last Member
	n := 0
	err := walk(obj, func(m Member) bool {
		n++
		last = m
		for i := range kvs {
			if found[i].ValueEnd == 0 && kvs[i].Key == m.Key {
				found[i] = m
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	// The replacements in the order of their members in obj.
	order := make([]int, 0, len(kvs))
	size := len(obj)
	for i, kv := range kvs {
		if m := found[i]; m.ValueEnd > 0 {
			order = append(order, i)
			size += len(kv.Value) - (m.ValueEnd - m.ValueStart)
		} else {
			size += len(kv.Key) + len(kv.Value) + 4
		}
	}
	slices.SortFunc(order, func(a, b int) int { return found[a].ValueStart - found[b].ValueStart })
	out := make([]byte, 0, size)
	pos := 0
	for _, i := range order {
		out = append(append(out, obj[pos:found[i].ValueStart]...), kvs[i].Value...)
		pos = found[i].ValueEnd
	}
	insertAt := bytes.IndexByte(obj, '{') + 1
	if n > 0 {
		insertAt = last.ValueEnd
	}
	out = append(out, obj[pos:insertAt]...)
	for i, kv := range kvs {
		if found[i].ValueEnd > 0 {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(append(AppendString(out, kv.Key), ':'), kv.Value...)
	}
	return append(out, obj[insertAt:]...), nil
}

// Delete returns a copy of obj without its members named key. When there is
// no such member it returns obj itself.
func Delete(obj []byte, key string) ([]byte, error) {
	return DeleteFunc(obj, func(k string) bool { return k == key })
}

// DeleteFunc returns a copy of obj without the members whose key drop
// reports true for, in one pass, every other byte as it was (see Cut).
// When it drops none it returns obj itself.
func DeleteFunc(obj []byte, drop func(key string) bool) ([]byte, error) {
	ms, err := Members(obj)
	if err != nil {
		return nil, err
	}
	var picked []int
	for i, m := range ms {
		if drop(m.Key) {
			picked = append(picked, i)
		}
	}
	if len(picked) == 0 {
		return obj, nil
	}
	spans := make([]Span, len(ms))
	for i, m := range ms {
		spans[i] = Span{Start: m.Start, End: m.ValueEnd}
	}
	return Cut(obj, spans, picked), nil
}

// walk calls fn for each top-level member of obj until fn returns false.
// The whole object is validated when fn never stops the walk; a walk that
// stops early has validated everything up to the member it stopped at.
func walk(obj []byte, fn func(Member) bool) error {
	r := Reader{b: obj}
	end, err := r.Object(0, func(key string, start, vs int) (int, error) {
		ve, err := r.Skip(vs)
		if err != nil {
			return 0, fmt.Errorf("rawjson: member %q: %w", key, err)
		}
		if !fn(Member{Key: key, Start: start, ValueStart: vs, ValueEnd: ve}) {
			return 0, errStopped
		}
		return ve, nil
	})
	switch {
	case err == errStopped:
		return nil
	case err != nil:
		return err
	}
	return trailing(obj, end)
}

// errStopped ends a walk whose callback asked to stop.
var errStopped = errors.New("rawjson: walk stopped")

// trailing accepts only white space after the object.
func trailing(obj []byte, i int) error {
	if SkipSpace(obj, i) != len(obj) {
		return errors.New("rawjson: data after the object")
	}
	return nil
}
