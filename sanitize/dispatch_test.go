package sanitize

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestByFirstExact checks the per-byte pattern lists matchSecret and
// matchScheme try against every pattern: for every byte, a pattern is
// listed exactly when a text starting with that byte can start with the
// pattern (case-sensitively for token prefixes, ignoring ASCII case for
// keys and schemes), and in its list's order, so that the first pattern
// tried that matches is the one the full list would have found.
func TestByFirstExact(t *testing.T) {
	for c := 0; c < 256; c++ {
		var prefixes, keys []string
		var schemes []int
		for _, p := range tokenPrefixes {
			if strings.HasPrefix(string(rune(c))+p[1:], p) && c < 0x80 {
				prefixes = append(prefixes, p)
			}
		}
		for _, k := range secretKeys {
			if c < 0x80 && hasPrefixFold(string(byte(c))+k[1:], k) {
				keys = append(keys, k)
			}
		}
		for n, sc := range authSchemes {
			if c < 0x80 && hasPrefixFold(string(byte(c))+sc.name[1:], sc.name) {
				schemes = append(schemes, n)
			}
		}
		if !slices.Equal(byFirst.prefixes[c], prefixes) || !slices.Equal(byFirst.keys[c], keys) ||
			!slices.Equal(byFirst.schemes[c], schemes) {
			t.Errorf("byte %#x: lists %q %q %v, want %q %q %v", c, byFirst.prefixes[c], byFirst.keys[c],
				byFirst.schemes[c], prefixes, keys, schemes)
		}
		if listed := len(prefixes)+len(keys)+len(schemes) > 0; listed != candidate[c] {
			t.Errorf("byte %#x: candidate %v, patterns listed %v", c, candidate[c], listed)
		}
	}
}

// everyPattern lists every pattern under every byte: matchSecret then
// tries them all, in order, as it did before the per-byte lists.
func everyPattern() (t struct {
	prefixes [256][]string
	keys     [256][]string
	schemes  [256][]int
}) {
	for c := range 256 {
		t.prefixes[c], t.keys[c] = tokenPrefixes, secretKeys
		for n := range authSchemes {
			t.schemes[c] = append(t.schemes[c], n)
		}
	}
	return t
}

// matchAll is forms.match without the pair filter: every form starting
// with the first byte is tried.
func matchAll(f *forms, s string) string {
	for _, c := range f.byFirst[s[0]] {
		if strings.HasPrefix(s, c) {
			return c
		}
	}
	return ""
}

// firstUncleanDecoding is firstUnclean without the table of kept ASCII
// bytes: every byte is classified as it is met.
func firstUncleanDecoding(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if dropASCII(c) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || isC1(r) || isTag(r) {
			return i
		}
		i += size
	}
	return -1
}

// FuzzDispatchSameResult checks that the shortcuts of the scan change
// nothing: Text with the per-byte pattern lists writes what trying every
// pattern writes, a Scrubber's form lookup with its pair filter finds at
// every position what the plain lookup finds, and firstUnclean with its
// table of kept bytes stops where classifying each byte stops.
func FuzzDispatchSameResult(f *testing.F) {
	for _, s := range []string{
		"Bearer abcdefghijklmnop", "x-api-key=abc", `{"accessToken":"a","Password":[1]}`, "AWS4-HMAC-SHA256 Credential=A/1, Signature=f",
		"sk-abcdefghij ghp_0123456789", "Cookie: a=1", "scram-sha-256 data=abc", "privatetoken token=abc", "NTLM TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAKAGFKAAAADw==",
	} {
		f.Add(s, "s3cr3t-value")
	}
	f.Add("a\x1b[31mb\x7f\u0085", "x")
	f.Fuzz(func(t *testing.T, in, secret string) {
		if got, want := firstUnclean(in), firstUncleanDecoding(in); got != want {
			t.Fatalf("firstUnclean(%q) = %d, want %d", in, got, want)
		}
		got := Text(in)
		filtered := byFirst
		byFirst = everyPattern()
		want := Text(in)
		byFirst = filtered
		if got != want {
			t.Fatalf("Text(%q)\n got %q\nwant %q (every pattern tried)", in, got, want)
		}
		sc := NewScrubber([]string{secret, in[:len(in)/2]})
		for _, fs := range []*forms{&sc.text, &sc.json} {
			for i := range len(in) {
				if got, want := fs.match(in[i:]), matchAll(fs, in[i:]); got != want {
					t.Fatalf("match(%q) = %q, want %q", in[i:], got, want)
				}
			}
		}
	})
}
