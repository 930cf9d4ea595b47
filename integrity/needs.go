package integrity

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A rule's hints say whether its patterns can match a text at all; most
// texts that hold one (a description that says "update" or "user") still
// do not match, and running the patterns on them was a quarter of the
// scan. needLiterals derives from the patterns themselves what else every
// match must contain, so that the patterns run only on texts that hold
// it. The result is a conjunction of clauses: the lower-cased text holds
// at least one string of every clause.
//
// The derivation reads each pattern's syntax tree: a literal is an exact
// string; a concatenation of exact sets is their product, an alternation
// their union, x? adds the empty string; a concatenation also needs every
// clause of its parts, an alternation one of each branch's, x+ and
// x{n,} with n >= 1 those of x. Zero-width assertions (\b, ^, $) match
// the empty string: dropping what they assert only weakens the
// condition. Anything else (classes, x*, any character) contributes
// nothing.
//
// A case-insensitive literal rune counts only when every rune it matches
// lower-cases to the same rune, so that the match shows in
// strings.ToLower(text) (the Kelvin sign matches 'k' and lower-cases to
// it). The long s, which matches 's' but stays itself lower-cased, is left
// out of that test: normalize writes it 's' before any pattern runs. A
// clause that every hint of the rule implies is dropped (the hints were
// found first), as is a string of a clause that holds another of it.

// maxExactSet bounds the strings an exact set holds; a larger one is used
// as a clause instead.
const maxExactSet = 32

// needInfo is what a node of a pattern requires of a text it matches.
type needInfo struct {
	// exact, when not nil, is every string the node can match, lower
	// cased.
	exact []string
	// clauses are conditions on the text, each a set of strings one of
	// which it contains (lower cased); for an exact node they are implied
	// by exact and left empty.
	clauses [][]string
}

var emptyNeed = needInfo{exact: []string{""}}

// needLiterals returns the clauses every match of all patterns needs
// besides one of hints (a clause every hint implies is left out), the
// cheapest to check first; nil when a pattern does not parse (it does
// not compile either).
func needLiterals(patterns, hints []string) [][]string {
	var out [][]string
	for _, p := range patterns {
		re, err := syntax.Parse(`(?i)`+p, syntax.Perl)
		if err != nil {
			return nil
		}
		for _, c := range needOf(re).asClauses() {
			c = minimalClause(c)
			if !impliedBy(c, hints) && !slices.ContainsFunc(out, func(x []string) bool { return slices.Equal(x, c) }) {
				out = append(out, c)
			}
		}
	}
	// Fewest strings first (a clause a text fails is searched for each of
	// them), then the longest shortest string (fewer texts hold it).
	slices.SortStableFunc(out, func(a, b []string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return clauseScore(b) - clauseScore(a)
	})
	return out
}

// minimalClause drops the strings of c that hold another of its strings:
// a text that holds "tools" holds "tool".
func minimalClause(c []string) []string {
	var out []string
	for i, s := range c {
		if !slices.ContainsFunc(c, func(x string) bool { return x != s && strings.Contains(s, x) }) &&
			!slices.Contains(c[:i], s) {
			out = append(out, s)
		}
	}
	return out
}

// impliedBy reports whether a text that holds one of hints always holds
// a string of c (hints is not empty and each hint holds one).
func impliedBy(c, hints []string) bool {
	for _, h := range hints {
		if !slices.ContainsFunc(c, func(x string) bool { return strings.Contains(h, x) }) {
			return false
		}
	}
	return len(hints) > 0
}

// asClauses is every condition of n as clauses; an exact set with the
// empty string is no condition.
func (n needInfo) asClauses() [][]string {
	if n.exact == nil {
		return n.clauses
	}
	if slices.Contains(n.exact, "") {
		return nil
	}
	return [][]string{n.exact}
}

// clauseScore is the length of a clause's shortest string: the longer,
// the fewer texts satisfy it by chance.
func clauseScore(c []string) int {
	m := -1
	for _, s := range c {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	return m
}

func needOf(re *syntax.Regexp) needInfo {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return emptyNeed
	case syntax.OpLiteral:
		return literalNeed(re)
	case syntax.OpCapture:
		return needOf(re.Sub[0])
	case syntax.OpConcat:
		return concatNeed(re.Sub)
	case syntax.OpAlternate:
		return alternateNeed(re.Sub)
	case syntax.OpQuest:
		if sub := needOf(re.Sub[0]); sub.exact != nil && len(sub.exact) < maxExactSet {
			return needInfo{exact: union(sub.exact, []string{""})}
		}
	case syntax.OpPlus:
		return needInfo{clauses: needOf(re.Sub[0]).asClauses()}
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return needInfo{clauses: needOf(re.Sub[0]).asClauses()}
		}
	}
	return needInfo{}
}

// literalNeed is an exact string when every rune of the literal shows
// lower-cased as one rune; otherwise the clauses of its parts that do.
func literalNeed(re *syntax.Regexp) needInfo {
	var parts []string
	var b strings.Builder
	exact := true
	for _, r := range re.Rune {
		if l, ok := lowerOf(r, re.Flags&syntax.FoldCase != 0); ok {
			b.WriteRune(l)
			continue
		}
		exact = false
		if b.Len() > 0 {
			parts = append(parts, b.String())
			b.Reset()
		}
	}
	if exact {
		return needInfo{exact: []string{b.String()}}
	}
	if b.Len() > 0 {
		parts = append(parts, b.String())
	}
	var n needInfo
	for _, p := range parts {
		n.clauses = append(n.clauses, []string{p})
	}
	return n
}

// lowerOf returns what strings.ToLower makes of every rune the literal
// rune r matches, if that is one rune.
func lowerOf(r rune, fold bool) (rune, bool) {
	l := unicode.ToLower(r)
	if r == utf8.RuneError {
		return 0, false
	}
	if !fold {
		return l, true
	}
	for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
		if o == 0x017F { // the long s: written 's' by normalize
			continue
		}
		if unicode.ToLower(o) != l {
			return 0, false
		}
	}
	return l, true
}

func concatNeed(subs []*syntax.Regexp) needInfo {
	var clauses [][]string
	cur := []string{""}
	allExact := true
	for _, s := range subs {
		n := needOf(s)
		if n.exact != nil && len(cur)*len(n.exact) <= maxExactSet {
			cur = product(cur, n.exact)
			continue
		}
		allExact = false
		clauses = append(clauses, needInfo{exact: cur}.asClauses()...)
		if n.exact != nil {
			cur = n.exact
		} else {
			clauses = append(clauses, n.clauses...)
			cur = []string{""}
		}
	}
	if allExact {
		return needInfo{exact: cur}
	}
	return needInfo{clauses: append(clauses, needInfo{exact: cur}.asClauses()...)}
}

func alternateNeed(subs []*syntax.Regexp) needInfo {
	ns := make([]needInfo, len(subs))
	allExact := true
	var all []string
	for i, s := range subs {
		ns[i] = needOf(s)
		if ns[i].exact == nil {
			allExact = false
		} else {
			all = union(all, ns[i].exact)
		}
	}
	if allExact && len(all) <= maxExactSet {
		return needInfo{exact: all}
	}
	// A match is one branch's: the union of one clause of each branch is
	// needed. Two such: the best clauses of each, and the second best.
	var out needInfo
	for k := 0; k < 2; k++ {
		var c []string
		for _, n := range ns {
			cs := n.asClauses()
			if len(cs) == 0 {
				return out // a branch that needs nothing
			}
			slices.SortStableFunc(cs, func(a, b []string) int { return clauseScore(b) - clauseScore(a) })
			c = union(c, cs[min(k, len(cs)-1)])
		}
		if !slices.ContainsFunc(out.clauses, func(x []string) bool { return slices.Equal(x, c) }) {
			out.clauses = append(out.clauses, c)
		}
	}
	return out
}

// product is every string of a followed by one of b.
func product(a, b []string) []string {
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = union(out, []string{x + y})
		}
	}
	return out
}

// union is a and the strings of b not in it, sorted.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// foldedText is a text as the needs of rules are checked against: its
// lower case. A non-ASCII text is lower-cased by strings.ToLower on first
// use; an ASCII one is searched with its letters folded instead.
type foldedText struct {
	norm    string
	ascii   bool
	lower   string
	lowered bool
}

// contains reports whether strings.ToLower(t.norm) contains sub.
func (t *foldedText) contains(sub string) bool {
	if !t.ascii {
		if !t.lowered {
			t.lower, t.lowered = strings.ToLower(t.norm), true
		}
		return strings.Contains(t.lower, sub)
	}
	if sub == "" {
		return true
	}
	for i := 0; i+len(sub) <= len(t.norm); i++ {
		if asciiLower[t.norm[i]] == sub[0] && hasPrefixFolded(t.norm[i:], sub) {
			return true
		}
	}
	return false
}

// containsNeeds reports whether t holds a string of every clause.
func (t *foldedText) containsNeeds(clauses [][]string) bool {
	for _, c := range clauses {
		if !slices.ContainsFunc(c, t.contains) {
			return false
		}
	}
	return true
}
