package randid

import (
	"regexp"
	"testing"
)

// TestFormats: each encoding gives the length and alphabet its callers put
// on the wire, and two calls differ.
func TestFormats(t *testing.T) {
	tests := []struct {
		name string
		f    func(int) string
		n    int
		want string
	}{
		{"hex 12", Hex, 12, `^[0-9a-f]{24}$`},
		{"hex 16", Hex, 16, `^[0-9a-f]{32}$`},
		{"hex 32", Hex, 32, `^[0-9a-f]{64}$`},
		{"base64url 32", Base64URL, 32, `^[A-Za-z0-9_-]{43}$`},
		{"base64 16", Base64, 16, `^[A-Za-z0-9+/]{22}$`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			re := regexp.MustCompile(tc.want)
			seen := map[string]bool{}
			for range 64 {
				id := tc.f(tc.n)
				if !re.MatchString(id) {
					t.Fatalf("%q does not match %s", id, tc.want)
				}
				if seen[id] {
					t.Fatalf("%q came twice", id)
				}
				seen[id] = true
			}
		})
	}
}

// TestAlphabets: over many ids every character of the alphabet shows up,
// so an encoding that used a narrower alphabet (or the wrong variant of
// base64) is caught.
func TestAlphabets(t *testing.T) {
	tests := []struct {
		name     string
		f        func(int) string
		alphabet string
	}{
		{"hex", Hex, "0123456789abcdef"},
		{"base64url", Base64URL, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"},
		{"base64", Base64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[rune]bool{}
			// 4096 random bytes: the chance that one of 64 symbols never
			// shows in ~5400 characters is below 1e-36.
			for _, r := range tc.f(4096) {
				seen[r] = true
			}
			for _, r := range tc.alphabet {
				if !seen[r] {
					t.Errorf("%q never appeared", r)
				}
			}
			if len(seen) != len(tc.alphabet) {
				t.Errorf("%d distinct characters, want %d", len(seen), len(tc.alphabet))
			}
		})
	}
}
