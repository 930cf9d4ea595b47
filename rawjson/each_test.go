package rawjson

import (
	"slices"
	"testing"
)

// refUnique is Unique as it was first written, over Members: the
// reference the stack-gathering one is held to.
func refUnique(obj []byte) error {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil
	}
	ms, err := Members(obj)
	if err != nil {
		return err
	}
	if repeats(ms) {
		return ErrDuplicateMember
	}
	return nil
}

// FuzzEachMemberUnique: EachMember hands out what Members returns, with
// its error, and Unique answers as refUnique, also past the members it
// gathers on the stack.
func FuzzEachMemberUnique(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":2}`, `{"a":1,"a":2}`, ` {"a":[1,{"a":2}]} `, `{"a":1} x`, `{"a":}`, `[1]`, `"s"`, ``,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"1":0}`, `{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}`,
		`{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		want, wantErr := Members(obj)
		var got []Member
		err := EachMember(obj, func(m Member) bool { got = append(got, m); return true })
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("EachMember(%q) error %v, Members %v", obj, err, wantErr)
		}
		if err == nil && !slices.Equal(got, want) {
			t.Fatalf("EachMember(%q) = %v, Members %v", obj, got, want)
		}
		u, ref := Unique(obj), refUnique(obj)
		if (u == nil) != (ref == nil) || u != nil && u.Error() != ref.Error() {
			t.Fatalf("Unique(%q) = %v, want %v", obj, u, ref)
		}
	})
}
