package namespace

import (
	"regexp"
	"strings"
	"testing"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"simple", "filesystem__read_file", true},
		{"dash", "a-b", true},
		{"one char", "x", true},
		{"exactly 64", strings.Repeat("a", 64), true},
		{"65", strings.Repeat("a", 65), false},
		{"empty", "", false},
		{"space", "a b", false},
		{"dot", "a.b", false},
		{"unicode", "café", false},
		{"nul", "a\x00", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidName(tc.in); got != tc.want {
				t.Errorf("ValidName(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if got := nameRE.MatchString(tc.in); got != tc.want {
				t.Errorf("regexp disagrees on %q: %v", tc.in, got)
			}
		})
	}
}

func TestDefaultDescription(t *testing.T) {
	if got, want := DefaultDescription("github", "list_issues"), "MCP tool list_issues from github"; got != want {
		t.Errorf("DefaultDescription = %q, want %q", got, want)
	}
}

func TestStyleValid(t *testing.T) {
	for s, want := range map[Style]bool{StyleZeroclaw: true, StyleHermes: true, "": false, "Hermes": false, "other": false} {
		if got := s.Valid(); got != want {
			t.Errorf("Style(%q).Valid() = %v, want %v", s, got, want)
		}
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		hermes bool
		want   string
	}{
		{"clean", "read_file", false, "read_file"},
		{"dash kept", "list-issues", false, "list-issues"},
		{"dash hermes", "list-issues", true, "list_issues"},
		{"dot", "fetch.data", false, "fetch_data"},
		{"space and parens", "greet (structured)", false, "greet__structured_"},
		{"one underscore per character", "café-日本", false, "caf_-__"},
		{"emoji", "a😀b", true, "a_b"},
		{"invalid utf8 per byte", "a\xff\xfeb", false, "a__b"},
		{"controls", "a\x00\n\tb", false, "a___b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sanitize(tc.in, tc.hermes); got != tc.want {
				t.Errorf("sanitize(%q, %v) = %q, want %q", tc.in, tc.hermes, got, tc.want)
			}
		})
	}
}
