package rawjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// member is a key and its value's bytes.
type member struct{ key, value string }

// descend reads the value at i with r, entering every object (and
// skipping everything else), and records each member it meets.
func descend(r *Reader, i int, seen *[]member) (int, error) {
	if b := r.Bytes(); i < len(b) && b[i] != '{' {
		return r.Skip(i)
	}
	return readObject(r, i, seen)
}

// readObject reads the object at i with r as descend does.
func readObject(r *Reader, i int, seen *[]member) (int, error) {
	b := r.Bytes()
	return r.Object(i, func(key string, start, vs int) (int, error) {
		if b[start] != '"' {
			return 0, errors.New("start is not the key's quote")
		}
		end, err := descend(r, vs, seen)
		if err == nil {
			*seen = append(*seen, member{key, string(b[vs:end])})
		}
		return end, err
	})
}

func TestReaderDescends(t *testing.T) {
	doc := []byte(` {"a": {"b" : [1, {"c":2}], "d":{}} , "e":"x\"y", "f":{"g":{"h":null}}} `)
	r := NewReader(doc)
	var seen []member
	end, err := readObject(r, 0, &seen)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range seen {
		got = append(got, m.key+"="+m.value)
	}
	if err := r.End(end); err != nil {
		t.Fatal(err)
	}
	want := `b=[1, {"c":2}]|d={}|a={"b" : [1, {"c":2}], "d":{}}|e="x\"y"|h=null|g={"h":null}|f={"g":{"h":null}}`
	if got := strings.Join(got, "|"); got != want {
		t.Errorf("members\n got %s\nwant %s", got, want)
	}
	for _, bad := range []string{`{"a":{"b":1,}}`, `{"a":{"b" 1}}`, `{"a":[1}`, `{"a":1} x`, `[1]`, `{"a":"\x01"}`} {
		r := NewReader([]byte(bad))
		end, err := readObject(r, 0, new([]member))
		if err == nil {
			err = r.End(end)
		}
		if err == nil {
			t.Errorf("%s: read without an error", bad)
		}
	}
}

// TestReaderCallbackError: Object returns the callback's error as it is
// and stops there.
func TestReaderCallbackError(t *testing.T) {
	mine := errors.New("mine")
	calls := 0
	_, err := NewReader([]byte(`{"a":1,"b":2}`)).Object(0, func(string, int, int) (int, error) {
		calls++
		return 0, mine
	})
	if err != mine || calls != 1 {
		t.Errorf("err %v after %d calls; want the callback's error after 1", err, calls)
	}
}

// TestReaderDepth: the nesting limit counts from the document's top
// across nested Objects and the values they skip.
func TestReaderDepth(t *testing.T) {
	deep := strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth)
	r := NewReader([]byte(deep))
	if _, err := readObject(r, 0, new([]member)); err != nil {
		t.Fatalf("%d levels: %v", maxDepth, err)
	}
	deeper := strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1)
	if _, err := readObject(NewReader([]byte(deeper)), 0, new([]member)); !errors.Is(err, errDepth) {
		t.Fatalf("%d levels: %v, want the depth error", maxDepth+1, err)
	}
	// Two levels read by Object, the rest skipped.
	r = NewReader([]byte(deeper))
	_, err := r.Object(0, func(_ string, _, vs int) (int, error) {
		return r.Object(vs, func(_ string, _, vs int) (int, error) { return r.Skip(vs) })
	})
	if !errors.Is(err, errDepth) {
		t.Fatalf("skipped below two Objects: %v, want the depth error", err)
	}
}

// FuzzReader holds a Reader that descends into every object to
// encoding/json: it reads exactly the valid documents whose top is an
// object, and every member value it reports is valid JSON.
func FuzzReader(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":{"b":{}}}`, ` {"a":[1,{"b":"\u00e9\n"}],"c":-0.5e+10} `, `{"a":{"b":01}}`, `{"a":{"b":1,}}`,
		`{"a":{"b":"\x01"}}`, `{"a":{"t":tru}}`, `[1]`, `{"a":{"b":[]}}x`, `{"\u0061":{"\u0062":null}}`, `{"a":{"b":1e}}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b)
		var seen []member
		end, err := readObject(r, 0, &seen)
		if err == nil {
			err = r.End(end)
		}
		var asObject map[string]json.RawMessage
		isObject := json.Valid(b) && json.Unmarshal(b, &asObject) == nil && asObject != nil
		if (err == nil) != isObject {
			t.Fatalf("Reader(%q) err = %v, but encoding/json object = %v", b, err, isObject)
		}
		if err != nil {
			return
		}
		for _, m := range seen {
			if !json.Valid([]byte(m.value)) {
				t.Fatalf("member %q: %q is not valid JSON", m.key, m.value)
			}
		}
	})
}
