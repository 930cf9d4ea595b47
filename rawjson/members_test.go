package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestSetReplaceKeepsEverythingElse(t *testing.T) {
	in := []byte(`{ "a" : 1 , "name":"old", "big": 18446744073709551615, "s":"<x>\u00e9" }`)
	got, err := Set(in, "name", []byte(`"new"`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{ "a" : 1 , "name":"new", "big": 18446744073709551615, "s":"<x>\u00e9" }`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if string(in) != `{ "a" : 1 , "name":"old", "big": 18446744073709551615, "s":"<x>\u00e9" }` {
		t.Fatal("input modified")
	}
}

func TestSetAppend(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, `{"k":true}`},
		{` { } `, ` {"k":true } `},
		{`{"a":[1,{"k":0}]}`, `{"a":[1,{"k":0}],"k":true}`},
	}
	for _, c := range cases {
		got, err := Set([]byte(c.in), "k", []byte(`true`))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if string(got) != c.want {
			t.Errorf("Set(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestGetNested(t *testing.T) {
	in := []byte(`{"result":{"tools":[{"name":"x"}],"nextCursor":"c"},"id":7}`)
	v, ok, err := Get(in, "result")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	tools, ok, err := Get(v, "tools")
	if err != nil || !ok || string(tools) != `[{"name":"x"}]` {
		t.Fatalf("tools = %s %v %v", tools, ok, err)
	}
	if _, ok, _ := Get(in, "missing"); ok {
		t.Fatal("found a missing key")
	}
}

func TestDelete(t *testing.T) {
	cases := []struct{ in, key, want string }{
		{`{"a":1,"b":2,"c":3}`, "b", `{"a":1,"c":3}`},
		{`{"a":1,"b":2,"c":3}`, "a", `{"b":2,"c":3}`},
		{`{"a":1,"b":2,"c":3}`, "c", `{"a":1,"b":2}`},
		{`{"a":1}`, "a", `{}`},
		{`{"a":1,"a":2,"b":3}`, "a", `{"b":3}`},
		{`{"a":1}`, "z", `{"a":1}`},
		// Every other byte stays as it was.
		{`{ "a" : 1 , "b":2,"c" :3 }`, "b", `{ "a" : 1 , "c" :3 }`},
		{"{\n  \"a\": 1,\n  \"b\": 2\n}", "b", "{\n  \"a\": 1\n}"},
	}
	for _, c := range cases {
		got, err := Delete([]byte(c.in), c.key)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want || !json.Valid(got) {
			t.Errorf("Delete(%s, %s) = %s, want %s", c.in, c.key, got, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{"a":}`, `{"a":1} x`, `{"a":1`} {
		if _, err := Members([]byte(in)); err == nil {
			t.Errorf("Members(%q): no error", in)
		}
	}
}

func TestString(t *testing.T) {
	if got := string(String(`a<b>"c`)); got != `"a<b>\"c"` {
		t.Fatalf("String = %s", got)
	}
	if got := string(AppendString([]byte("x"), "tools/call")); got != `x"tools/call"` {
		t.Fatalf("AppendString = %s", got)
	}
}

// FuzzAppendString: AppendString writes what encoding/json writes without
// HTML escaping (canonical tool definitions depend on it), for any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "px-1", `a"b`, `back\slash`, "tab\there\b\f\r\n", "é😀", "<&>", "\x00\x1f\x7f", "\xff\xfe", "\u2028\u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte{'\n'})) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want.Bytes())
		}
	})
}

func FuzzSetDelete(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"c":[1,2]}}`), "b", []byte(`"v"`))
	f.Add([]byte(`{}`), "k", []byte(`null`))
	f.Fuzz(func(t *testing.T, obj []byte, key string, val []byte) {
		if !json.Valid(val) || !utf8.ValidString(key) {
			return // keys are always the proxy's own valid strings
		}
		out, err := Set(obj, key, val)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Set produced invalid JSON %q from %q", out, obj)
		}
		got, ok, err := Get(out, key)
		if err != nil || !ok {
			t.Fatalf("Get after Set: %v %v", ok, err)
		}
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(val, &b) != nil {
			t.Fatal("unmarshal")
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Set wrote %q for the value %q", got, val)
		}
		del, err := Delete(out, key)
		if err != nil || !json.Valid(del) {
			t.Fatalf("Delete: %v %q", err, del)
		}
		if _, ok, _ := Get(del, key); ok {
			t.Fatalf("key still present after Delete: %q", del)
		}
	})
}

// FuzzMembersValidity checks the hand-written scanner against encoding/json:
// Members accepts exactly the valid JSON objects, and the member ranges it
// reports are the values encoding/json sees.
func FuzzMembersValidity(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` {"a":[1,{"b":"\u00e9\n"}],"c":-0.5e+10} `, `{"a":01}`, `{"a":1,}`,
		`{"a":"\x01"}`, `{"a":tru}`, `[1]`, `{"a":{"b":[]}}x`, `{"\u0061":null}`, `{"a":1e}`, `{"a":-}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := Members(b)
		var asObject map[string]json.RawMessage
		// Unmarshal of null into a map succeeds and leaves it nil: null is
		// not an object.
		isObject := json.Valid(b) && json.Unmarshal(b, &asObject) == nil && asObject != nil
		if (err == nil) != isObject {
			t.Fatalf("Members(%q) err = %v, but encoding/json object = %v", b, err, isObject)
		}
		for _, m := range ms {
			v := b[m.ValueStart:m.ValueEnd]
			if !json.Valid(v) {
				t.Fatalf("member %q value %q is not valid JSON", m.Key, v)
			}
		}
	})
}

func TestUnquote(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{`"plain"`, "plain", false},
		{`""`, "", false},
		{`"h\u00e9llo\n"`, "héllo\n", false},
		{`"héllo ✓"`, "héllo ✓", false},
		{"\"a\xffb\"", "a\ufffdb", false},
		{`"a\"b"`, `a"b`, false},
		{`"a"b"`, "", true},
		{"\"a\nb\"", "", true},
		{`7`, "", true},
		{`"`, "", true},
	} {
		got, err := Unquote([]byte(tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Unquote(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// FuzzUnquote holds Unquote to encoding/json's decoding of a string.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"x"`, `"\u00e9\ud83d\ude00"`, "\"\xc3\x28\"", `"a\\b"`, `"\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Unquote(in)
		var want string
		werr := json.Unmarshal(in, &want)
		// Unquote takes a value as Members gives it, without the white
		// space around it that encoding/json also accepts.
		literal := len(in) >= 2 && in[0] == '"' && in[len(in)-1] == '"'
		if literal && (err != nil) != (werr != nil) {
			t.Fatalf("Unquote(%q): error %v, encoding/json %v", in, err, werr)
		}
		if err == nil && werr == nil && got != want {
			t.Fatalf("Unquote(%q) = %q, encoding/json %q", in, got, want)
		}
		if err == nil && werr != nil {
			t.Fatalf("Unquote(%q) accepted what encoding/json refuses: %v", in, werr)
		}
	})
}

func TestPick(t *testing.T) {
	got, err := Pick([]byte(` {"b":[1, 2],"x":{"b":3},"a":"s"} `), "a", "b", "c")
	if err != nil || string(got[0]) != `"s"` || string(got[1]) != `[1, 2]` || got[2] != nil {
		t.Fatalf("Pick = %q, %v", got, err)
	}
	if _, err := Pick([]byte(`{"a":1,"b":2,"a":3}`), "a"); !errors.Is(err, ErrDuplicateMember) || err.Error() != `member "a" is given twice` {
		t.Errorf("a named member twice: %v", err)
	}
	if got, err := Pick([]byte(`{"a":1,"z":2,"z":3}`), "a"); err != nil || string(got[0]) != "1" {
		t.Errorf("an unnamed member twice: %q, %v", got, err)
	}
	for _, bad := range []string{`[]`, `{"a":}`, `{"a":1} 2`, ``} {
		if _, err := Pick([]byte(bad), "a"); err == nil {
			t.Errorf("Pick(%q) accepted it", bad)
		}
	}
}

// FuzzPick holds Pick to Members: a named member's value is its only
// occurrence's, a named member given twice is a DuplicateError, and
// anything Members refuses Pick refuses.
func FuzzPick(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[2]}`, `{"a":1,"a":2}`, `{"b":{"a":1}}`, `{"\u0061":3,"a":4}`, `{"a":1} x`, `null`} {
		f.Add([]byte(s), "a", "b")
	}
	f.Add([]byte(`{"a":1,"a":2,"b":`), "a", "b")
	f.Fuzz(func(t *testing.T, b []byte, n1, n2 string) {
		if n1 == n2 {
			return
		}
		got, err := Pick(b, n1, n2)
		ms, merr := Members(b)
		if merr != nil {
			if err == nil || errors.Is(err, ErrDuplicateMember) {
				t.Fatalf("Pick(%q) = %v where Members finds bad JSON: %v", b, err, merr)
			}
			return
		}
		count := map[string]int{}
		want := map[string]string{}
		for _, m := range ms {
			count[m.Key]++
			want[m.Key] = string(b[m.ValueStart:m.ValueEnd])
		}
		if count[n1] > 1 || count[n2] > 1 {
			if !errors.Is(err, ErrDuplicateMember) {
				t.Fatalf("Pick(%q, %q, %q) = %v, want a duplicate error", b, n1, n2, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Pick(%q) = %v", b, err)
		}
		for i, n := range []string{n1, n2} {
			if string(got[i]) != want[n] || (got[i] == nil) != (count[n] == 0) {
				t.Fatalf("Pick(%q)[%q] = %q, want %q", b, n, got[i], want[n])
			}
		}
	})
}

// FuzzSetMany: setting several members at once gives what setting them one
// by one gives (Set of one member is SetMany; the chain is the oracle of
// the order of replacements and appends).
func FuzzSetMany(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"c":[1,2]},"a":3}`), "b", []byte(`"v"`), "z", []byte(`[]`), "a", []byte(`{}`))
	f.Add([]byte(` { } `), "k", []byte(`null`), "k2", []byte(`1`), "k3", []byte(`true`))
	f.Add([]byte(`{"tools":[],"_meta":{"x":1}}`), "_meta", []byte(`{"y":2}`), "resultType", []byte(`"complete"`), "ttlMs", []byte(`0`))
	f.Fuzz(func(t *testing.T, obj []byte, k1 string, v1 []byte, k2 string, v2 []byte, k3 string, v3 []byte) {
		kvs := []KV{{k1, v1}, {k2, v2}, {k3, v3}}
		for i, kv := range kvs {
			if !json.Valid(kv.Value) || !utf8.ValidString(kv.Key) {
				return
			}
			for _, other := range kvs[:i] {
				if other.Key == kv.Key {
					if _, err := SetMany(obj, kvs...); err == nil {
						t.Fatalf("SetMany took %q twice", kv.Key)
					}
					return
				}
			}
		}
		got, err := SetMany(obj, kvs...)
		want := obj
		var werr error
		for _, kv := range kvs {
			if want, werr = Set(want, kv.Key, kv.Value); werr != nil {
				break
			}
		}
		if (err != nil) != (werr != nil) || err == nil && !bytes.Equal(compact(got), compact(want)) {
			t.Fatalf("SetMany(%q) = %q, %v; one by one %q, %v", obj, got, err, want, werr)
		}
	})
}

// compact is b without white space between tokens. Set appends after the
// last member's value, so a value given with white space around it moves
// that space: SetMany and a chain of Sets agree but for where it lands.
func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}
