// Package confusables maps characters that look like ASCII to the ASCII
// they look like, after the confusables data of Unicode Technical Standard
// #39 (Unicode Security Mechanisms, https://www.unicode.org/reports/tr39/).
//
// The table is a restriction of confusables.txt to what the description
// scan of package integrity needs: the text it looks up has already been
// decomposed (NFKD) and stripped of nonspacing marks, and its patterns are
// ASCII. So it holds only non-ASCII characters that NFKD leaves as they are
// and that are not nonspacing marks, and only those whose prototype is
// printable ASCII once decomposed and stripped of marks. ASCII characters
// are not mapped ('I' and 'l' share a prototype, but the scan compares
// ASCII as it is). Where an upper-case letter and its lower-case form both
// map, the upper-case letter takes the lower-case form's target: TR39 gives
// Cyrillic 'І' the prototype 'l', which hides the 'i' the reader sees.
//
// table.go is generated from Unicode's confusables.txt by the command in
// ./gen, whose doc says where to get the file; the go:generate line below
// runs it.
package confusables

//go:generate go run ./gen -in ${CONFUSABLES_TXT} -out table.go

import "slices"

// entry maps one character to the ASCII it looks like.
type entry struct {
	r rune
	s string
}

// ASCII returns the ASCII string r looks like, and whether the table maps
// r. It never maps an ASCII character. It is safe for concurrent use.
func ASCII(r rune) (string, bool) {
	if r < 0x80 || r < table[0].r || r > table[len(table)-1].r {
		return "", false
	}
	i, ok := slices.BinarySearchFunc(table[:], r, func(e entry, r rune) int { return int(e.r - r) })
	if !ok {
		return "", false
	}
	return table[i].s, true
}

// Version is the version of Unicode's confusables.txt the table was
// generated from.
const Version = version
