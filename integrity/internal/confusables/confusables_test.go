package confusables

import (
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

func TestASCII(t *testing.T) {
	for _, c := range []struct {
		r    rune
		want string
		ok   bool
	}{
		{0x0456, "i", true}, // Cyrillic і
		{0x0406, "i", true}, // Cyrillic І: the lower-case form's target, not TR39's 'l'
		{0x0430, "a", true}, // Cyrillic а
		{0x043E, "o", true}, // Cyrillic о
		{0x03BF, "o", true}, // Greek ο
		{0x0399, "i", true}, // Greek Ι
		{0x2019, "'", true}, // right single quotation mark
		{0x0131, "i", true}, // dotless ı
		{'i', "", false},    // ASCII is never mapped
		{'I', "", false},
		{0xFF49, "", false}, // fullwidth ｉ: NFKD makes it 'i' before any look-up
		{0x05E9, "", false}, // Hebrew shin: no ASCII look-alike
		{0x4E00, "", false},
		{unicode.MaxRune, "", false},
	} {
		got, ok := ASCII(c.r)
		if got != c.want || ok != c.ok {
			t.Errorf("ASCII(%U) = %q, %v; want %q, %v", c.r, got, ok, c.want, c.ok)
		}
	}
}

// TestTable: the table is sorted, maps no ASCII, no nonspacing mark and
// nothing NFKD changes, and only to printable ASCII.
func TestTable(t *testing.T) {
	if Version == "" || len(table) < 500 {
		t.Fatalf("version %q, %d entries", Version, len(table))
	}
	for i, e := range table {
		if i > 0 && table[i-1].r >= e.r {
			t.Fatalf("not sorted at %U", e.r)
		}
		if e.r < 0x80 || unicode.Is(unicode.Mn, e.r) || !norm.NFKD.IsNormalString(string(e.r)) {
			t.Errorf("%U should not be in the table", e.r)
		}
		if e.s == "" {
			t.Errorf("%U maps to nothing", e.r)
		}
		for _, c := range []byte(e.s) {
			if c < 0x20 || c > 0x7E {
				t.Errorf("%U maps to %q", e.r, e.s)
			}
		}
	}
}
