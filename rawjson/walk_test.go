package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// compactWalk writes the value at i as json.Compact would, reading it with
// r only: Fields and Array for containers, Skip for every other value, the
// names as Fields gives them. It enters every object and array, so every
// separator is read by the Reader.
func compactWalk(r *Reader, dst *[]byte, i int) (int, error) {
	b := r.Bytes()
	if i >= len(b) {
		return r.Skip(i) // the scanner's error
	}
	switch b[i] {
	case '{':
		*dst = append(*dst, '{')
		n := 0
		end, err := r.Fields(i, func(name []byte, vs int) (int, error) {
			if n > 0 {
				*dst = append(*dst, ',')
			}
			n++
			*dst = append(append(*dst, name...), ':')
			return compactWalk(r, dst, vs)
		})
		*dst = append(*dst, '}')
		return end, err
	case '[':
		*dst = append(*dst, '[')
		n := 0
		end, err := r.Array(i, func(vs int) (int, error) {
			if n > 0 {
				*dst = append(*dst, ',')
			}
			n++
			return compactWalk(r, dst, vs)
		})
		*dst = append(*dst, ']')
		return end, err
	}
	end, err := r.Skip(i)
	if err == nil {
		*dst = append(*dst, b[i:end]...)
	}
	return end, err
}

// walkAll reads doc whole with r (see compactWalk) and returns what it
// wrote.
func walkAll(r *Reader) ([]byte, error) {
	var out []byte
	end, err := compactWalk(r, &out, SkipSpace(r.Bytes(), 0))
	if err == nil {
		err = r.End(end)
	}
	return out, err
}

func TestReaderFieldsArray(t *testing.T) {
	doc := []byte(" [ {\"a\" : [1, \"x\\\"y\"], \"\\u0062\":{} } , [ ] ,\n true, -0.5e3 ] ")
	for _, r := range []*Reader{NewReader(doc), NewLaxReader(doc)} {
		got, err := walkAll(r)
		if err != nil || string(got) != `[{"a":[1,"x\"y"],"\u0062":{}},[],true,-0.5e3]` {
			t.Errorf("lax %v: %s, %v", r.lax, got, err)
		}
	}
	for _, bad := range []string{`[1,]`, `[1 2]`, `{"a":1,}`, `{"a" 1}`, `[`, `{"a":[}`, `["x]`, `[1]]`} {
		for _, r := range []*Reader{NewReader([]byte(bad)), NewLaxReader([]byte(bad))} {
			if _, err := walkAll(r); err == nil {
				t.Errorf("lax %v: %q accepted", r.lax, bad)
			}
		}
	}
	if _, err := NewReader([]byte(`{}`)).Array(0, nil); !errors.Is(err, ErrNotArray) {
		t.Errorf("Array of an object: %v", err)
	}
	if _, err := NewReader([]byte(`[]`)).Fields(0, nil); !errors.Is(err, ErrNotObject) {
		t.Errorf("Fields of an array: %v", err)
	}
	stop := errors.New("stop")
	if _, err := NewReader([]byte(`[1,2]`)).Array(0, func(int) (int, error) { return 0, stop }); err != stop {
		t.Errorf("Array returned %v, not its callback's error", err)
	}
}

// The lax reader checks structure and numbers but not what is between a
// string's quotes.
func TestLaxReaderStrings(t *testing.T) {
	for _, doc := range []string{"[\"a\x01b\"]", `["\x"]`, `{"\q":1}`} {
		if _, err := walkAll(NewReader([]byte(doc))); err == nil {
			t.Errorf("%q: the validating reader accepted it", doc)
		}
		if _, err := walkAll(NewLaxReader([]byte(doc))); err != nil {
			t.Errorf("%q: the lax reader refused it: %v", doc, err)
		}
	}
	for _, doc := range []string{`["a\"]`, `[01]`, `[tru]`, `{"a":1 "b":2}`} {
		if _, err := walkAll(NewLaxReader([]byte(doc))); err == nil {
			t.Errorf("%q: the lax reader accepted it", doc)
		}
	}
}

func TestReaderArrayDepth(t *testing.T) {
	doc := []byte(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1))
	if _, err := walkAll(NewReader(doc)); !errors.Is(err, errDepth) {
		t.Fatalf("%d nested arrays: %v, want the depth error", maxDepth+1, err)
	}
	doc = doc[1 : len(doc)-1]
	if _, err := walkAll(NewReader(doc)); err != nil {
		t.Fatalf("%d nested arrays: %v", maxDepth, err)
	}
}

// FuzzReaderWalk holds a Reader that enters every object and array to
// encoding/json: the validating one accepts exactly the valid documents
// and writes what json.Compact writes; the lax one accepts every valid
// document, writing the same, and on anything else ends without a panic.
func FuzzReaderWalk(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, ` [1, {"a":["x\"",{}]}, -0.5e+10, true, null] `, `{"a":01}`, `[1,]`,
		"[\"\x01\"]", `["\u00e9\ud83d\ude00"]`, `[tru]`, `{"a":[]}x`, `"s"`, `3`, `["a\\"]`, `["a\\\"]`,
		`[` + strconv.Quote(strings.Repeat("lorem ipsum ", 8)) + `]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := walkAll(NewReader(b))
		valid := json.Valid(b)
		if (err == nil) != valid {
			t.Fatalf("Reader(%q): err %v, json.Valid %v", b, err, valid)
		}
		lax, laxErr := walkAll(NewLaxReader(b))
		if !valid {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("Reader(%q) wrote %q, json.Compact %q", b, got, want.Bytes())
		}
		if laxErr != nil || !bytes.Equal(lax, want.Bytes()) {
			t.Fatalf("lax Reader(%q) wrote %q, %v; json.Compact %q", b, lax, laxErr, want.Bytes())
		}
	})
}

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		quoted, s string
		want      bool
	}{
		{`"content"`, "content", true},
		{`"\u0063ontent"`, "content", true},
		{`"content"`, "contents", false},
		{`"\u0063\u006f\u006e\u0074\u0065\u006e\u0074"`, "content", true},
		{`"\u0063\u006f\u006e\u0074\u0065\u006e\u0074 "`, "content", false},
		{"\"\xff\"", "\ufffd", true},
		{"\"\xff\"", "\xff", false},
		{`"a\"b"`, `a"b`, true},
		{`content`, "content", false},
		{`""`, "", true},
	} {
		if got := Equal([]byte(tc.quoted), tc.s); got != tc.want {
			t.Errorf("Equal(%s, %q) = %v, want %v", tc.quoted, tc.s, got, tc.want)
		}
	}
}

// FuzzEqualAppendUnquoted holds Equal and AppendUnquoted to Unquote.
func FuzzEqualAppendUnquoted(f *testing.F) {
	for _, s := range []string{`"x"`, `"\u0078"`, "\"\xff\"", `"a\\b"`, `"\"`, `"\ud83d\ude00"`, `"é"`, "\"\x01\""} {
		f.Add([]byte(s), "x")
	}
	f.Fuzz(func(t *testing.T, quoted []byte, s string) {
		want, werr := Unquote(quoted)
		if got := Equal(quoted, s); got != (werr == nil && want == s) {
			t.Fatalf("Equal(%q, %q) = %v; Unquote %q, %v", quoted, s, got, want, werr)
		}
		if werr == nil && !Equal(quoted, want) {
			t.Fatalf("Equal(%q, its own value %q) is false", quoted, want)
		}
		got, err := AppendUnquoted([]byte("pre"), quoted)
		switch {
		case (err == nil) != (werr == nil):
			t.Fatalf("AppendUnquoted(%q): %v; Unquote %v", quoted, err, werr)
		case err == nil && string(got) != "pre"+want:
			t.Fatalf("AppendUnquoted(%q) = %q, want %q", quoted, got, "pre"+want)
		case err != nil && string(got) != "pre":
			t.Fatalf("AppendUnquoted(%q) failed but wrote %q", quoted, got)
		}
	})
}

func TestStringReader(t *testing.T) {
	for _, lit := range []string{
		`""`,
		`"plain"`,
		`"a\/b\\c\"d"`,
		`"\b\f\n\r\t"`,
		`"\u0041\u00e9\u65e5"`,
		`"\ud83d\ude00 pair"`,
		`"lone \ud83d high"`,
		`"lone \ude00 low"`,
		`"\ud83d\u0041 high then BMP"`,
		`"\ud83d\ud83d two highs"`,
		`"ends with \ud83d"`,
		`"raw é and 日"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		got, err := io.ReadAll(NewStringReader([]byte(lit)))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q, %v; want %q", lit, got, err, want)
		}
		// One byte at a time exercises the pending buffer of multi-byte escapes.
		got, err = io.ReadAll(iotest.OneByteReader(NewStringReader([]byte(lit))))
		if err != nil || string(got) != want {
			t.Errorf("%s one byte at a time: got %q, %v; want %q", lit, got, err, want)
		}
		if err := iotest.TestReader(NewStringReader([]byte(lit)), []byte(want)); err != nil {
			t.Errorf("%s: %v", lit, err)
		}
	}
}

func TestStringReaderMalformed(t *testing.T) {
	for _, lit := range []string{`"\"`, `"\x"`, `"\u12"`, `"\u12G4"`, `"ok\"`, `plain`, `"`} {
		got, err := io.ReadAll(NewStringReader([]byte(lit)))
		if err == nil || err.Error() == "" {
			t.Errorf("%s: read %q without an error", lit, got)
		}
	}
}

// FuzzStringReader holds NewStringReader to encoding/json's decoding of
// the literals it reads back byte-exactly (valid UTF-8).
func FuzzStringReader(f *testing.F) {
	for _, s := range []string{`plain`, `a\/b`, `\u00e9\ud83d\ude00`, `\ud800`, `\ud800\u0041`, `\"\\\b\f\n\r\t`, `\`, `\u12`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		lit := append(append([]byte{'"'}, raw...), '"')
		got, err := io.ReadAll(NewStringReader(lit))
		var want string
		if !utf8.Valid(raw) || json.Unmarshal(lit, &want) != nil {
			return
		}
		if err != nil || string(got) != want {
			t.Fatalf("%q: got %q, %v; encoding/json %q", raw, got, err, want)
		}
	})
}

// BenchmarkSkipText is the validating scan of a tools/call result of
// 12 kB of text, the common case of a result; BenchmarkSkipTextLax the
// lax one.
func BenchmarkSkipText(b *testing.B)    { benchSkip(b, NewReader) }
func BenchmarkSkipTextLax(b *testing.B) { benchSkip(b, NewLaxReader) }

func benchSkip(b *testing.B, newReader func([]byte) *Reader) {
	in := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 1000) + `"}],"structuredContent":{"rows":[1,2,3]}}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := newReader(in).Skip(0); err != nil {
			b.Fatal(err)
		}
	}
}
