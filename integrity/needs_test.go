package integrity

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNeedLiterals(t *testing.T) {
	for _, c := range []struct {
		name    string
		pattern string
		want    [][]string
	}{
		{"concatenation", `\bupdate\s+other\s+tools?\b`, [][]string{{"update"}, {"other"}, {"tool"}}},
		{"a string holding another is dropped", `(?:tools?|functions?|xfunction)\b`, [][]string{{"function", "tool"}}},
		{"product", `(?:ab|cd)(?:e|fg)`, [][]string{{"abe", "abfg", "cde", "cdfg"}}},
		{"optional part", `colou?r`, [][]string{{"color", "colour"}}},
		{"star is nothing", `x*yz`, [][]string{{"yz"}}},
		{"class is nothing", `ab[cd]ef`, [][]string{{"ab"}, {"ef"}}},
		{"branch that needs nothing", `(?:foo|x*)bar`, [][]string{{"bar"}}},
		{"branches' best clauses", `(?:a\s+bcd|ef\s+g)`, [][]string{{"bcd", "ef"}, {"a", "g"}}},
		{"plus", `(?:ab)+\s`, [][]string{{"ab"}}},
		{"repeat", `(?:ab){2,}\s(?:cd){0,3}`, [][]string{{"ab"}}},
		{"case-sensitive literal", `(?-i:ABC)`, [][]string{{"abc"}}},
		{"kelvin sign lower-cases to k", `\x{212A}ey`, [][]string{{"key"}}},
		{"long s counts as s (normalize writes it so)", `a\x{17F}b`, [][]string{{"asb"}}},
		{"micro sign is not lower-cased to mu", `a\x{3BC}b`, [][]string{{"a"}, {"b"}}},
		{"U+0130 lower-cases to i", `\x{130}d`, [][]string{{"id"}}},
		{"zero-width", `^\bab\B$`, [][]string{{"ab"}}},
		{"nothing", `\s+`, nil},
		{"does not parse", `(`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := needLiterals([]string{c.pattern}, nil); !reflect.DeepEqual(got, c.want) {
				t.Errorf("needLiterals(%q) = %q, want %q", c.pattern, got, c.want)
			}
		})
	}
}

// The needs of rules whose patterns need more than their hints, and of
// one whose hint is all its pattern needs.
// A clause every hint implies is not checked again.
func TestNeedLiteralsBesidesHints(t *testing.T) {
	for _, c := range []struct {
		hints []string
		want  [][]string
	}{
		{[]string{"update"}, [][]string{{"other"}, {"tool"}}},
		{[]string{"update other"}, [][]string{{"tool"}}},
		{[]string{"update", "x"}, [][]string{{"update"}, {"other"}, {"tool"}}},
		{[]string{"tools"}, [][]string{{"update"}, {"other"}}},
	} {
		if got := needLiterals([]string{`\bupdate\s+other\s+tools?\b`}, c.hints); !reflect.DeepEqual(got, c.want) {
			t.Errorf("needLiterals with hints %q = %q, want %q", c.hints, got, c.want)
		}
	}
}

func TestRuleNeeds(t *testing.T) {
	want := map[string][][]string{
		"html_comment":   nil,
		"all_tools_must": {{"tool"}, {"all", "any", "every"}},
		"change_other_tools": {{"function", "tool"},
			{"argument", "behavior", "behaviour", "description", "destination", "input", "other", "output", "parameter", "recipient", "result"}},
		"covert_action": {{"add", "append", "attach", "call", "collect", "copy", "execute", "exfiltrate", "forward", "include", "invoke", "pass",
			"post", "read", "run", "send", "share", "transmit", "upload"}},
		"instead_of_tool": {{"tool"}, {"calling", "invoking", "using"}}, // "of" or "than": in the hints
	}
	seen := 0
	for _, r := range rules {
		if w, ok := want[r.rule]; ok {
			seen++
			if got := r.needs(); !reflect.DeepEqual(got, w) {
				t.Errorf("rule %s needs %q, want %q", r.rule, got, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d rules found", seen, len(want))
	}
}

func isASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf })
}

// foldedText finds in an ASCII text what strings.Contains finds in the
// text lower-cased.
func TestFoldedText(t *testing.T) {
	for _, s := range append(findHintsCases(), wordCases...) {
		lower := strings.ToLower(s)
		for _, sub := range slices.Concat(allHints, []string{"", "a", "z", "to", lower, lower + "x", "\u00e9"}) {
			want := strings.Contains(lower, sub)
			for _, ft := range []*foldedText{{norm: s}, {norm: s, ascii: isASCII(s)}} {
				if got := ft.contains(sub); got != want {
					t.Fatalf("foldedText{%q, ascii %v}.contains(%q) = %v, want %v", s, ft.ascii, sub, got, want)
				}
			}
		}
	}
}

// FuzzNeedLiterals: a text a pattern matches holds, lower-cased, a string
// of every clause the pattern needs.
func FuzzNeedLiterals(f *testing.F) {
	for _, r := range phraseRules {
		for _, p := range r.all {
			for _, c := range detectorCases {
				for _, s := range c.positive {
					f.Add(p, s)
				}
			}
		}
	}
	f.Add(`\x{212A}ey|(?-i:ABC)|colou?r`, "\u212aEY")
	f.Add(`\x{130}d`, "\u0130D")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		re, err := regexp.Compile(`(?i)` + pattern)
		if err != nil {
			return
		}
		norm := normalize(s)
		if re.MatchString(norm) && !(&foldedText{norm: norm, ascii: isASCII(norm)}).containsNeeds(needLiterals([]string{pattern}, nil)) {
			t.Fatalf("%q matches %q without the literals it needs %q", pattern, norm, needLiterals([]string{pattern}, nil))
		}
	})
}
