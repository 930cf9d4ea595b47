package integrity

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/mcp-proxy/mcp-proxy/integrity/internal/confusables"
)

// invisibleClass is one family of characters that render as nothing, or
// reorder what renders, yet reach the model: the ways to hide text from the
// person reading a tool description (ASCII smuggling with tag characters,
// "Trojan Source" bidi reordering, zero-width padding that breaks keyword
// filters, ANSI escapes that erase a terminal line, emoji variation
// selector smuggling).
type invisibleClass struct {
	rule  string
	level Level
	what  string
	// ranges are inclusive.
	ranges [][2]rune
	// minRun is how many of the class in a row make a finding (and are
	// removed by strip); 1 means any.
	minRun int
}

// invisibleClasses is the data of the invisible-character detector.
var invisibleClasses = []invisibleClass{
	{rule: "tag_characters", level: LevelQuarantine, what: "Unicode tag characters",
		ranges: [][2]rune{{0xE0000, 0xE007F}}, minRun: 1},
	{rule: "bidi_controls", level: LevelQuarantine, what: "bidirectional embedding, override or isolate controls",
		ranges: [][2]rune{{0x202A, 0x202E}, {0x2066, 0x2069}}, minRun: 1},
	{rule: "zero_width", level: LevelQuarantine, what: "zero-width or invisible operator characters",
		ranges: [][2]rune{{0x200B, 0x200B}, {0x2060, 0x2064}, {0xFEFF, 0xFEFF}, {0x180E, 0x180E}}, minRun: 1},
	// One selector after an emoji or ideograph is ordinary text; runs of
	// them carry hidden bytes.
	{rule: "variation_selectors", level: LevelQuarantine, what: "runs of variation selectors",
		ranges: [][2]rune{{0xFE00, 0xFE0F}, {0xE0100, 0xE01EF}}, minRun: 2},
	// Tab, newline and carriage return are ordinary; ESC starts the ANSI
	// sequences that hide text in terminals.
	{rule: "control_characters", level: LevelQuarantine, what: "control characters",
		ranges: [][2]rune{{0x00, 0x08}, {0x0B, 0x0C}, {0x0E, 0x1F}, {0x7F, 0x9F}}, minRun: 1},
	// Joiners and direction marks belong in emoji sequences and in Arabic,
	// Hebrew, Persian and Indic text; they are worth a warning only.
	{rule: "joiners_and_marks", level: LevelWarn, what: "zero-width joiners, direction marks or soft hyphens",
		ranges: [][2]rune{{0x200C, 0x200F}, {0x061C, 0x061C}, {0x00AD, 0x00AD}, {0x034F, 0x034F}}, minRun: 1},
}

// invisibleClassOf returns the index of r's class in invisibleClasses, or
// -1.
func invisibleClassOf(r rune) int {
	if r >= 0x20 && r < 0x7F {
		return -1
	}
	for i, c := range invisibleClasses {
		for _, rg := range c.ranges {
			if r >= rg[0] && r <= rg[1] {
				return i
			}
		}
	}
	return -1
}

// invisibleRun is one maximal run of characters of one class.
type invisibleRun struct {
	class      int
	start, end int // byte offsets
	n          int // characters
}

// invisibleRuns returns the runs of invisible characters in s that are at
// least their class's minRun long.
func invisibleRuns(s string) []invisibleRun {
	var out []invisibleRun
	cur := invisibleRun{class: -1}
	flush := func() {
		if cur.class >= 0 && cur.n >= invisibleClasses[cur.class].minRun {
			out = append(out, cur)
		}
		cur = invisibleRun{class: -1}
	}
	// Printable ASCII, most texts, is no invisible character: the runes
	// are read from the first other byte.
	k := 0
	for k < len(s) && s[k] >= 0x20 && s[k] < 0x7F {
		k++
	}
	for i, r := range s[k:] {
		i += k
		if r < 0x80 && r >= 0x20 && r != 0x7F {
			flush()
			continue
		}
		c := invisibleClassOf(r)
		switch {
		case c < 0:
			flush()
		case c == cur.class:
			cur.end = i + utf8.RuneLen(r)
			cur.n++
		default:
			flush()
			cur = invisibleRun{class: c, start: i, end: i + utf8.RuneLen(r), n: 1}
		}
	}
	flush()
	return out
}

// invisibleFindings reports each class found in s once, with how many
// characters and, for tag characters, the ASCII they spell.
func invisibleFindings(where, s string) []Finding {
	runs := invisibleRuns(s)
	if len(runs) == 0 {
		return nil
	}
	counts := make([]int, len(invisibleClasses))
	var hidden strings.Builder
	for _, r := range runs {
		counts[r.class] += r.n
		if invisibleClasses[r.class].rule == "tag_characters" {
			for _, c := range s[r.start:r.end] {
				if a := c - 0xE0000; a >= 0x20 && a < 0x7F {
					hidden.WriteRune(a)
				}
			}
		}
	}
	var out []Finding
	for i, n := range counts {
		if n == 0 {
			continue
		}
		c := invisibleClasses[i]
		excerpt := strconv.Itoa(n) + " " + c.what
		if c.rule == "tag_characters" && hidden.Len() > 0 {
			excerpt += " spelling " + strconv.Quote(cutRunes(hidden.String(), maxExcerptRunes))
		}
		out = append(out, Finding{Kind: KindInvisible, Level: c.level, Rule: c.rule, Where: where, Excerpt: excerpt})
	}
	return out
}

// stripInvisible removes the runs invisibleRuns finds.
func stripInvisible(s string) string {
	runs := invisibleRuns(s)
	if len(runs) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, r := range runs {
		b.WriteString(s[last:r.start])
		last = r.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// normalize prepares s for the phrase detectors, whose patterns are ASCII:
// every invisible character removed (so "ig\u200bnore" reads "ignore"),
// every run of white space one space, and every other character that is
// not ASCII compared on its ASCII look-alike, a skeleton in the manner of
// Unicode TR39: decomposed for compatibility (NFKD: fullwidth "ｉｇｎｏｒｅ"
// and mathematical "𝐢𝐠𝐧𝐨𝐫𝐞" read "ignore", the long s reads 's'),
// nonspacing marks dropped ("ïgnöre" reads "ignore"), then each character
// that Unicode's confusables data gives an ASCII prototype written as that
// (Cyrillic "іgnore" reads "ignore"; see package confusables). What has no
// ASCII look-alike (Hebrew, CJK, emoji) stays as it is.
func normalize(s string) string {
	if isPlainASCII(s) {
		return s
	}
	return normalizeRunes(s)
}

// normalizeRunes is normalize without the shortcut for plain ASCII.
func normalizeRunes(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	var decomposed []byte
	for i, r := range s {
		if r < 0x80 {
			space = writeFolded(&b, r, space)
			continue
		}
		if invisibleClassOf(r) >= 0 {
			continue
		}
		if r == utf8.RuneError {
			space = writeFolded(&b, r, space) // or a byte of invalid UTF-8
			continue
		}
		// Each character decomposed on its own: the marks a
		// decomposition reorders are dropped anyway.
		decomposed = norm.NFKD.AppendString(decomposed[:0], s[i:i+utf8.RuneLen(r)])
		for _, d := range string(decomposed) {
			switch {
			case d < 0x80:
				space = writeFolded(&b, d, space)
			case unicode.Is(unicode.Mn, d) || invisibleClassOf(d) >= 0:
			default:
				if a, ok := confusables.ASCII(d); ok {
					for k := 0; k < len(a); k++ {
						space = writeFolded(&b, rune(a[k]), space)
					}
					continue
				}
				space = writeFolded(&b, d, space)
			}
		}
	}
	return b.String()
}

// writeFolded writes r to b as normalize does: white space is held back
// (space says one is pending) and written as one ' ' before the next
// character, none at either end; invisible characters are dropped. It
// returns whether a space is pending.
func writeFolded(b *strings.Builder, r rune, space bool) bool {
	if isSpace(r) {
		return true
	}
	if invisibleClassOf(r) >= 0 {
		return space
	}
	if space && b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteRune(r)
	return false
}

// isPlainASCII reports whether normalize(s) is s: printable ASCII with
// single spaces between words and none at either end (most descriptions).
func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7F || c == ' ' && (i == 0 || i == len(s)-1 || s[i-1] == ' ') {
			return false
		}
	}
	return true
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
