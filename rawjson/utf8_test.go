package rawjson

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestValidUTF8(t *testing.T) {
	tests := []struct {
		name, in, want string // want "" means: in, unchanged and not copied
	}{
		{name: "ascii", in: `{"text":"plain"}`},
		{name: "multibyte", in: "{\"text\":\"\u00e9\u4e2d\U0001F600\"}"},
		{name: "escaped lone surrogates", in: `{"text":"\ud800 \udfff \uDB40"}`},
		{name: "literal U+FFFD", in: "\"\uFFFD\""},
		{name: "stray continuation", in: "\"a\x80b\"", want: "\"a\uFFFDb\""},
		{name: "two stray bytes", in: "\"\xff\xfe\"", want: "\"\uFFFD\uFFFD\""},
		{name: "truncated three-byte sequence", in: "\"\xe2\x82\"", want: "\"\uFFFD\""},
		{name: "truncated four-byte sequence", in: "\"\xf0\x9f\x98x\"", want: "\"\uFFFDx\""},
		{name: "overlong", in: "\"\xc0\xaf\"", want: "\"\uFFFD\uFFFD\""},
		{name: "overlong three-byte", in: "\"\xe0\x80\xaf\"", want: "\"\uFFFD\uFFFD\uFFFD\""},
		{name: "encoded surrogate", in: "\"\xed\xa0\x80\"", want: "\"\uFFFD\uFFFD\uFFFD\""},
		{name: "past U+10FFFF", in: "\"\xf4\x90\x80\x80\"", want: "\"\uFFFD\uFFFD\uFFFD\uFFFD\""},
		{name: "F5 and above", in: "\"\xf5\xbf\"", want: "\"\uFFFD\uFFFD\""},
		{name: "cut at the end", in: "ok\xe4\xb8", want: "ok\uFFFD"},
		{name: "next to a literal U+FFFD", in: "\xe4\uFFFD\xb8", want: "\uFFFD\uFFFD\uFFFD"},
		{name: "only the bad bytes change", in: "{\"a\":\"\u00e9\xff\",\"b\":[1.50,\"\\u00e9\"]}", want: "{\"a\":\"\u00e9\uFFFD\",\"b\":[1.50,\"\\u00e9\"]}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got, fixed := ValidUTF8(in)
			if tt.want == "" {
				if fixed || !sameSlice(got, in) {
					t.Errorf("ValidUTF8(%q) = %q, fixed %v; want the input itself", tt.in, got, fixed)
				}
				return
			}
			if !fixed || string(got) != tt.want {
				t.Errorf("ValidUTF8(%q) = %q, fixed %v; want %q", tt.in, got, fixed, tt.want)
			}
			if string(in) != tt.in {
				t.Errorf("the input was modified: %q", in)
			}
		})
	}
}

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// FuzzValidUTF8: valid input comes back as it is (the same slice); the
// output is always valid UTF-8; and it is the input with each run of
// ill-formed bytes replaced by at least one and at most one U+FFFD per
// byte, every valid character kept in place.
func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "plain", "\u00e9\U0001F600", "a\x80b", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80",
		"\xc0\xaf", "\xff\uFFFD\xfe", `"\ud800"`, "\xe4\uFFFD\xb8"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out, fixed := ValidUTF8(in)
		if !bytes.Equal(in, orig) {
			t.Fatalf("the input was modified")
		}
		if !utf8.Valid(out) {
			t.Fatalf("ValidUTF8(%q) = %q: not valid UTF-8", in, out)
		}
		if utf8.Valid(in) {
			if fixed || !sameSlice(out, in) {
				t.Fatalf("valid %q came back as %q (fixed %v), not as itself", in, out, fixed)
			}
			return
		}
		if !fixed {
			t.Fatalf("invalid %q not reported fixed", in)
		}
		checkRepair(t, in, out)
	})
}

// checkRepair checks that out is in with each maximal run of ill-formed
// bytes (as utf8.DecodeRune reads them) replaced by 1 to n U+FFFD, n the
// run's length, and every well-formed character kept.
func checkRepair(t *testing.T, in, out []byte) {
	t.Helper()
	const fffd = "\uFFFD"
	i, j := 0, 0
	for i < len(in) {
		r, size := utf8.DecodeRune(in[i:])
		if r != utf8.RuneError || size > 1 {
			if !bytes.HasPrefix(out[j:], in[i:i+size]) {
				t.Fatalf("ValidUTF8(%q) = %q: the character at %d changed", in, out, i)
			}
			i, j = i+size, j+size
			continue
		}
		// A span of ill-formed runs and literal U+FFFDs: the literal ones
		// cannot be told from replacements, so the span is counted whole.
		bad, runs, literal, prevBad := 0, 0, 0, false
		for i < len(in) {
			if bytes.HasPrefix(in[i:], []byte(fffd)) {
				literal, i, prevBad = literal+1, i+len(fffd), false
				continue
			}
			r, size := utf8.DecodeRune(in[i:])
			if r != utf8.RuneError || size > 1 {
				break
			}
			if !prevBad {
				runs++
			}
			bad, i, prevBad = bad+1, i+1, true
		}
		got := 0
		for bytes.HasPrefix(out[j:], []byte(fffd)) {
			got, j = got+1, j+len(fffd)
		}
		if got < runs+literal || got > bad+literal {
			t.Fatalf("ValidUTF8(%q) = %q: %d ill-formed bytes in %d runs became %d U+FFFD", in, out, bad, runs, got-literal)
		}
	}
	if j != len(out) {
		t.Fatalf("ValidUTF8(%q) = %q: bytes added at the end", in, out)
	}
}

// BenchmarkValidUTF8 is the cost of the check on a valid 64 KiB message,
// the case every upstream message takes.
func BenchmarkValidUTF8(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":"px-1","result":{"content":[{"type":"text","text":"` +
		string(bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789"), 64<<10/36)) + `"}]}}`)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, fixed := ValidUTF8(msg); fixed {
			b.Fatal("fixed")
		}
	}
}
