package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on analyzed text. Tool catalogs and queries come from untrusted
// upstreams and models; these keep one document's and one query's cost small
// and fixed, and are far above what a useful description or query holds.
const (
	// maxTextBytes is how much of one description, parameter description or
	// query is analyzed; the rest is ignored.
	maxTextBytes = 8 << 10
	// maxTokensPerField caps the terms one field of one document contributes.
	maxTokensPerField = 1024
	// minWordLen is the shortest word kept: single letters ("a", the "s" of
	// "what's") carry no meaning for tool search.
	minWordLen = 2
)

// splitWords calls emit with each word of s in order: the maximal runs of
// letters and digits, split further at camelCase boundaries ("getTinyImage"
// into get, Tiny, Image; "HTTPServer" into HTTP, Server) and between letters
// and digits ("base64" into base, 64). A run that was split is also emitted
// whole after its parts ("GitHub" gives Git, Hub, GitHub), because such names
// are often meant, and typed, as one word. Words keep their case.
func splitWords(s string, emit func(word string)) {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isWordRune(r) {
			i += size
			continue
		}
		start := i
		for i < len(s) {
			r, size = utf8.DecodeRuneInString(s[i:])
			if !isWordRune(r) {
				break
			}
			i += size
		}
		splitRun(s[start:i], emit)
	}
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// runeClass sorts the runes of a run for boundary detection.
type runeClass uint8

const (
	classLower runeClass = iota
	classUpper
	classDigit
)

func classOf(r rune) runeClass {
	switch {
	case unicode.IsDigit(r):
		return classDigit
	case unicode.IsUpper(r):
		return classUpper
	default:
		return classLower
	}
}

// splitRun splits one run of letters and digits (see splitWords).
func splitRun(run string, emit func(string)) {
	start := 0
	parts := 0
	var prev runeClass
	prevStart := 0 // byte offset of the previous rune
	for i, r := range run {
		c := classOf(r)
		if i > 0 {
			cut := -1
			switch {
			case (prev == classDigit) != (c == classDigit):
				cut = i // letter/digit boundary
			case prev == classLower && c == classUpper:
				cut = i // camelCase: "getTiny"
			case prev == classUpper && c == classLower && prevStart > start:
				cut = prevStart // acronym end: "HTTPServer" cuts before "S"
			}
			if cut > start {
				emit(run[start:cut])
				parts++
				start = cut
			}
		}
		prev = c
		prevStart = i
	}
	emit(run[start:])
	if parts > 0 {
		emit(run)
	}
}

// analyzer turns text into index terms: words (splitWords) lowercased, stop
// words and short words dropped, stemmed (stem), and abbreviations expanded
// to the words they stand for (canonical). Index and query use the same
// analyzer, so a term matches exactly when both sides normalize alike.
type analyzer struct{}

// terms calls emit with each term of text, in order. At most maxTextBytes of
// text are read and at most limit terms emitted (limit <= 0: no limit).
func (analyzer) terms(text string, limit int, emit func(term string)) {
	if len(text) > maxTextBytes {
		text = text[:maxTextBytes]
	}
	n := 0
	splitWords(text, func(word string) {
		if limit > 0 && n >= limit {
			return
		}
		normalize(word, func(t string) {
			if limit > 0 && n >= limit {
				return
			}
			emit(t)
			n++
		})
	})
}

// normalize calls emit with the terms of one word: none for a stop word or
// a word shorter than minWordLen, the expansion of an abbreviation, or else
// the stem.
func normalize(word string, emit func(string)) {
	if utf8.RuneCountInString(word) < minWordLen {
		return
	}
	w := strings.ToLower(word)
	if stopWords[w] {
		return
	}
	s := stem(w)
	if exp, ok := canonical[s]; ok {
		for _, t := range exp {
			emit(t)
		}
		return
	}
	emit(s)
}

// stem strips common English inflections with a few ordered suffix rules, a
// much smaller cousin of Porter's step 1. It only has to be consistent (the
// same stem for "create", "creates", "created", "creating"), not produce
// words. Words of three letters or fewer are left alone.
//
//  1. plurals: -ies → -y, -sses → -ss, -es after s/x/z/ch/sh → drop,
//     -s (not -ss, -us, -is) → drop;
//  2. -ied → -y; -ing, -ed → drop when at least three letters with a vowel
//     remain;
//  3. -er → drop when at least four letters remain ("folder" → "fold",
//     but "user" and "order" stay);
//  4. a final -e → drop when at least three letters remain;
//  5. a final doubled consonant other than l, s, z → single, in words of
//     four letters or more ("committ" → "commit", "runn" → "run"; "add"
//     stays).
func stem(w string) string {
	if len(w) <= 3 || !isASCIILower(w) {
		return w
	}
	// 1. plurals
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "es") && esPlural(w[:len(w)-2]):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	// 2. -ied, -ing, -ed
	switch {
	case strings.HasSuffix(w, "ied") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ing") && stemOK(w[:len(w)-3]):
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && stemOK(w[:len(w)-2]):
		w = w[:len(w)-2]
	}
	// 3. -er
	if strings.HasSuffix(w, "er") && len(w)-2 >= 4 {
		w = w[:len(w)-2]
	}
	// 4. final e
	if strings.HasSuffix(w, "e") && len(w)-1 >= 3 {
		w = w[:len(w)-1]
	}
	// 5. doubled consonant
	if n := len(w); n >= 4 && w[n-1] == w[n-2] && !isVowel(w[n-1]) && !strings.ContainsRune("lsz", rune(w[n-1])) {
		w = w[:n-1]
	}
	return w
}

// esPlural reports whether base+"es" is a plural that drops "es" ("boxes",
// "matches", "statuses"), as opposed to one that drops only "s" ("files").
func esPlural(base string) bool {
	return strings.HasSuffix(base, "s") || strings.HasSuffix(base, "x") || strings.HasSuffix(base, "z") ||
		strings.HasSuffix(base, "ch") || strings.HasSuffix(base, "sh")
}

// stemOK reports whether s may stand as a stem after -ing or -ed: three
// letters or more, with a vowel ("string" and "bring" keep their -ing).
func stemOK(s string) bool {
	if len(s) < 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if isVowel(s[i]) || s[i] == 'y' {
			return true
		}
	}
	return false
}

func isVowel(c byte) bool {
	return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'
}

func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// Terms returns the index terms of text in order, as Build and Search
// analyze it: words split at case and digit boundaries, lowercased, stop
// words dropped, stemmed, abbreviations expanded. Generators of the
// package's embedded tables use it, so the tables hold terms the index
// itself makes.
func Terms(text string) []string {
	var out []string
	analyzer{}.terms(text, 0, func(t string) { out = append(out, t) })
	return out
}
