package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// spansOf reads the items of an object or array as spans.
func spansOf(t testing.TB, doc []byte) []Span {
	t.Helper()
	if i := SkipSpace(doc, 0); i < len(doc) && doc[i] == '[' {
		els, err := Elements(doc)
		if err != nil {
			t.Fatal(err)
		}
		return els
	}
	ms, err := Members(doc)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Span, len(ms))
	for i, m := range ms {
		out[i] = Span{m.Start, m.ValueEnd}
	}
	return out
}

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		drop []int
		want string
	}{
		{"nothing", `{"a":1}`, nil, `{"a":1}`},
		{"first", `{ "a" : 1 , "b":2,"c" :3 }`, []int{0}, `{ "b":2,"c" :3 }`},
		{"middle", `{ "a" : 1 , "b":2,"c" :3 }`, []int{1}, `{ "a" : 1 , "c" :3 }`},
		{"last", `{ "a" : 1 , "b":2,"c" :3 }`, []int{2}, `{ "a" : 1 , "b":2 }`},
		{"first two", `{"a":1, "b":2, "c":3}`, []int{0, 1}, `{"c":3}`},
		{"last two", `{"a":1, "b":2, "c":3}`, []int{1, 2}, `{"a":1}`},
		{"both ends", `{"a":1, "b":2, "c":3}`, []int{0, 2}, `{"b":2}`},
		{"all", "{ \"a\":1,\n \"b\":[2] }", []int{0, 1}, `{  }`},
		{"only", `[ "x" ]`, []int{0}, `[  ]`},
		{"array middle", `["a", "b" ,"c"]`, []int{1}, `["a", "c"]`},
		{"array keeps number spelling", `[1.50, 2e3, "x\u00e9"]`, []int{0}, `[2e3, "x\u00e9"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := []byte(tt.doc)
			got := Cut(doc, spansOf(t, doc), tt.drop)
			if string(got) != tt.want {
				t.Fatalf("Cut = %s, want %s", got, tt.want)
			}
			if string(doc) != tt.doc {
				t.Fatal("input modified")
			}
			if !json.Valid(got) {
				t.Fatalf("Cut gave invalid JSON: %s", got)
			}
		})
	}
}

func TestElements(t *testing.T) {
	for _, bad := range []string{``, `{}`, `[1,]`, `[1 2]`, `[1] x`, `["a`} {
		if _, err := Elements([]byte(bad)); err == nil {
			t.Errorf("Elements(%q) succeeded", bad)
		}
	}
	els, err := Elements([]byte(` [ 1 , {"a":[2]},"s" ] `))
	if err != nil || len(els) != 3 {
		t.Fatalf("Elements = %v, %v", els, err)
	}
	if els, err := Elements([]byte(`[ ]`)); err != nil || len(els) != 0 {
		t.Fatalf("empty: %v, %v", els, err)
	}
}

// FuzzCut: whatever is dropped from a valid object or array, the result is
// valid JSON holding exactly the kept items, each byte for byte, in order,
// and is the input with some byte ranges removed.
func FuzzCut(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":2}`), uint64(1))
	f.Add([]byte(" { \"a\" : [1, 2] ,\n\t\"b\":{\"c\":null} , \"a\":\"dup\" } "), uint64(5))
	f.Add([]byte(`[1, "two", {"three":3}, [4]]`), uint64(10))
	f.Add([]byte(`[]`), uint64(0))
	f.Fuzz(func(t *testing.T, doc []byte, mask uint64) {
		var spans []Span
		if els, err := Elements(doc); err == nil {
			spans = els
		} else if ms, err := Members(doc); err == nil {
			for _, m := range ms {
				spans = append(spans, Span{m.Start, m.ValueEnd})
			}
		} else {
			return
		}
		var drop []int
		var kept [][]byte
		for i, s := range spans {
			if i < 64 && mask&(1<<i) != 0 {
				drop = append(drop, i)
			} else {
				kept = append(kept, doc[s.Start:s.End])
			}
		}
		got := Cut(doc, spans, drop)
		if !json.Valid(got) {
			t.Fatalf("Cut(%q, %v) = %q: invalid JSON", doc, drop, got)
		}
		again := spansOf(t, got)
		if len(again) != len(kept) {
			t.Fatalf("Cut(%q, %v) = %q: %d items, want %d", doc, drop, got, len(again), len(kept))
		}
		for i, s := range again {
			if !bytes.Equal(got[s.Start:s.End], kept[i]) {
				t.Fatalf("item %d is %q, want %q", i, got[s.Start:s.End], kept[i])
			}
		}
		// A subsequence of the input: no byte added or changed.
		j := 0
		for i := 0; i < len(doc) && j < len(got); i++ {
			if doc[i] == got[j] {
				j++
			}
		}
		if j != len(got) {
			t.Fatalf("Cut(%q) = %q is not the input with ranges removed", doc, got)
		}
	})
}
