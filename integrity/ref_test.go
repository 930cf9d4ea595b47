package integrity

// This file keeps the description scan as it was before it was made
// faster (main at 413311a), as the reference the differential tests hold
// the current scan to: the same findings, words, stripped bytes and
// errors for every input. Only what changed is kept; invisibleFindings,
// stripInvisible, decodeString and isStripRule are the package's (the
// first two call invisibleRuns, which the tests compare with
// refInvisibleRuns).

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// refScanObject scans one client-visible tool object.
func refScanObject(obj []byte) scanResult {
	texts, err := refCollectTexts(obj)
	if err != nil {
		return scanResult{findings: []Finding{{Kind: KindUnreadable, Level: LevelQuarantine, Rule: "unreadable",
			Excerpt: cutRunes(sanitize.Text(err.Error()), maxExcerptRunes)}}}
	}
	var res scanResult
	stripNeeded := false
	for _, t := range texts {
		norm := normalize(t.value)
		fs := refScanNormalized(t.where, t.value, norm)
		res.findings = append(res.findings, fs...)
		for _, f := range fs {
			if f.Kind == KindInvisible || isStripRule(f.Rule) {
				stripNeeded = true
			}
		}
		if !t.schemaValue {
			res.words = refAppendWords(res.words, t.where, norm)
		}
	}
	if !stripNeeded {
		return res
	}
	res.stripped, res.strippedFindings = refStripObject(obj, texts)
	return res
}

// refScanText runs every detector but the cross-server one over one text.
func refScanText(where, s string) []Finding {
	return refScanNormalized(where, s, normalize(s))
}

// refScanNormalized is refScanText of s whose normalize is norm.
func refScanNormalized(where, s, norm string) []Finding {
	out := invisibleFindings(where, s)
	hints := refFindHints(strings.ToLower(norm))
	matched := map[string]bool{}
	for i := range rules {
		r := &rules[i]
		if !hints.any(refHintIdx[i]) || slices.ContainsFunc(r.unless, func(u string) bool { return matched[u] }) {
			continue
		}
		var first []int
		ok := true
		for j, re := range r.res() {
			loc := re.FindStringIndex(norm)
			if loc == nil {
				ok = false
				break
			}
			if j == 0 {
				first = loc
			}
		}
		if ok {
			matched[r.rule] = true
			out = append(out, Finding{Kind: r.kind, Level: r.level, Rule: r.rule, Where: where, Excerpt: excerpt(norm, first)})
		}
	}
	out = append(out, encodedFindings(where, norm, 0)...)
	if strings.HasSuffix(where, "description") {
		if n := utf8.RuneCountInString(s); n > maxDescriptionRunes {
			out = append(out, Finding{Kind: KindLongDescription, Level: LevelWarn, Rule: "long_description", Where: where,
				Excerpt: strconv.Itoa(n) + " characters (limit " + strconv.Itoa(maxDescriptionRunes) + ")"})
		}
	}
	return out
}

// refStripObject removes invisible characters and hidden markup from every
// scanned text of obj, keeping every other byte, and scans the result.
func refStripObject(obj []byte, texts []text) ([]byte, []Finding) {
	out := make([]byte, 0, len(obj))
	last := 0
	var findings []Finding
	for _, t := range texts {
		clean := t.value
		if !t.schemaValue {
			clean = stripMarkup(stripInvisible(t.value))
		}
		findings = append(findings, refScanText(t.where, clean)...)
		if clean == t.value {
			continue
		}
		out = append(out, obj[last:t.start]...)
		out = append(out, rawjson.String(clean)...)
		last = t.end
	}
	if last == 0 {
		return nil, nil // nothing removed
	}
	out = append(out, obj[last:]...)
	return out, findings
}

// refAppendWords adds the identifier-like words of s: runs of letters,
// digits, '_', '-' and '.', without leading or trailing '.' and '-'.
func refAppendWords(out []word, where, s string) []word {
	start := -1
	emit := func(end int) {
		w := trimDots(s[start:end])
		// Only distinctive words can name another server's tool (see
		// Peers); the rest are not kept.
		if distinctive(w) {
			out = append(out, word{text: w, where: where})
		}
		start = -1
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			emit(i)
		}
	}
	if start >= 0 {
		emit(len(s))
	}
	return out
}

// refScannedMember reports whether the string at path is one the scan reads:
// the tool's description and title, annotations.title, and every
// description and title inside inputSchema and outputSchema (parameter
// and property descriptions at any depth).
func refScannedMember(path []string) bool {
	last := path[len(path)-1]
	if last != "description" && last != "title" {
		return false
	}
	switch {
	case len(path) == 1:
		return true
	case path[0] == "annotations":
		return len(path) == 2 && last == "title"
	case path[0] == "inputSchema" || path[0] == "outputSchema":
		// A property named "description" is an object under
		// properties; only string values reach here.
		return true
	}
	return false
}

// refScanned reports whether the scan reads the string at path, and
// whether as a schema value: a string at any depth under enum, const,
// default or examples inside inputSchema or outputSchema, unless that key
// is a name under properties, patternProperties, $defs, definitions or
// dependentSchemas.
func refScanned(path []string) (scanned, schemaValue bool) {
	if len(path) == 0 {
		return false, false
	}
	if refScannedMember(path) {
		return true, false
	}
	if path[0] != "inputSchema" && path[0] != "outputSchema" {
		return false, false
	}
	for k := 1; k < len(path); k++ {
		switch path[k] {
		case "enum", "const", "default", "examples":
			switch path[k-1] {
			case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			default:
				return true, true
			}
		}
	}
	return false, false
}

// refCollectTexts returns the scanned strings of one tool object, in document
// order. The object must be valid JSON (the upstream package read it so):
// the refWalker checks strings and structure but skips other values without
// checking them, so other input gives an error or odd texts, never a panic.
func refCollectTexts(obj []byte) ([]text, error) {
	w := &refWalker{b: obj}
	w.skipSpace()
	if w.i >= len(w.b) || w.b[w.i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	if err := w.value(0); err != nil {
		return nil, err
	}
	w.skipSpace()
	if w.i != len(w.b) {
		return nil, fmt.Errorf("data after the object at offset %d", w.i)
	}
	return w.out, nil
}

// refWalker is a small JSON reader that follows object keys and records the
// scanned strings. It checks syntax only as far as it needs to find value
// boundaries; the input has already been parsed by the upstream side.
type refWalker struct {
	b    []byte
	i    int
	path []string
	out  []text
}

func (w *refWalker) skipSpace() { w.i = rawjson.SkipSpace(w.b, w.i) }

func (w *refWalker) syntax(what string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", w.i, what)
}

func (w *refWalker) value(depth int) error {
	if depth > maxTextDepth {
		return errTooDeep
	}
	w.skipSpace()
	if w.i >= len(w.b) {
		return w.syntax("unexpected end")
	}
	switch c := w.b[w.i]; {
	case c == '{':
		return w.object(depth)
	case c == '[':
		return w.array(depth)
	case c == '"':
		start := w.i
		end, err := w.stringEnd()
		if err != nil {
			return err
		}
		if scanned, schemaValue := refScanned(w.path); scanned {
			s, err := decodeString(w.b[start:end])
			if err != nil {
				return err
			}
			w.out = append(w.out, text{where: strings.Join(w.path, "."), value: s, start: start, end: end, schemaValue: schemaValue})
		}
		return nil
	default:
		for w.i < len(w.b) && !strings.ContainsRune(",]} \t\n\r", rune(w.b[w.i])) {
			w.i++
		}
		return nil
	}
}

func (w *refWalker) object(depth int) error {
	w.i++ // {
	w.skipSpace()
	if w.i < len(w.b) && w.b[w.i] == '}' {
		w.i++
		return nil
	}
	for {
		w.skipSpace()
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			return w.syntax("expected a key")
		}
		start := w.i
		end, err := w.stringEnd()
		if err != nil {
			return err
		}
		key, err := decodeString(w.b[start:end])
		if err != nil {
			return err
		}
		w.skipSpace()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return w.syntax("expected ':'")
		}
		w.i++
		w.path = append(w.path, key)
		err = w.value(depth + 1)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
		if end, err := w.separator('}'); end || err != nil {
			return err
		}
	}
}

func (w *refWalker) array(depth int) error {
	w.i++ // [
	w.skipSpace()
	if w.i < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return nil
	}
	for n := 0; ; n++ {
		w.path = append(w.path, "["+strconv.Itoa(n)+"]")
		err := w.value(depth + 1)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
		if end, err := w.separator(']'); end || err != nil {
			return err
		}
	}
}

// separator reads the ',' between members or elements, or the closer that
// ends the object or array (end is then true).
func (w *refWalker) separator(closer byte) (end bool, err error) {
	w.skipSpace()
	if w.i >= len(w.b) {
		return false, w.syntax("unexpected end")
	}
	switch w.b[w.i] {
	case ',':
		w.i++
		return false, nil
	case closer:
		w.i++
		return true, nil
	}
	return false, w.syntax("expected ',' or '" + string(closer) + "'")
}

// stringEnd moves past the string at w.i (its opening quote) and returns
// the offset just after its closing quote.
func (w *refWalker) stringEnd() (int, error) {
	for j := w.i + 1; j < len(w.b); j++ {
		switch w.b[j] {
		case '\\':
			j++
		case '"':
			w.i = j + 1
			return w.i, nil
		}
	}
	return 0, w.syntax("unterminated string")
}

var refHintsByFirst = refIndexHints(allHints)

// refHintIdx is each rule's hints as indexes into allHints (the rules
// held them so).
var refHintIdx = func() [][]int {
	out := make([][]int, len(rules))
	for i, r := range rules {
		for _, h := range r.hints {
			for j, x := range allHints {
				if x == h {
					out[i] = append(out[i], j)
				}
			}
		}
	}
	return out
}()

// refHintRef is one hint of allHints and its index there.
type refHintRef struct {
	text  string
	index int
}

func refIndexHints(hints []string) *[256][]refHintRef {
	var out [256][]refHintRef
	for i, h := range hints {
		out[h[0]] = append(out[h[0]], refHintRef{h, i})
	}
	return &out
}

// refHintSet is which of allHints a text contains (by index).
type refHintSet []bool

// refFindHints finds every hint in the lower-cased text in one pass: at each
// byte only the hints that begin with it are compared (their second byte
// first), instead of one search of the whole text per hint.
func refFindHints(lower string) refHintSet {
	found := make(refHintSet, len(allHints))
	for i := 0; i < len(lower); i++ {
		for _, h := range refHintsByFirst[lower[i]] {
			if found[h.index] || len(h.text) > 1 && (i+1 == len(lower) || lower[i+1] != h.text[1]) {
				continue
			}
			if strings.HasPrefix(lower[i:], h.text) {
				found[h.index] = true
			}
		}
	}
	return found
}

// any reports whether the text contains one of the hints idx.
func (h refHintSet) any(idx []int) bool {
	for _, i := range idx {
		if h[i] {
			return true
		}
	}
	return false
}

// refInvisibleRuns returns the runs of invisible characters in s that are at
// least their class's minRun long.
func refInvisibleRuns(s string) []invisibleRun {
	var out []invisibleRun
	cur := invisibleRun{class: -1}
	flush := func() {
		if cur.class >= 0 && cur.n >= invisibleClasses[cur.class].minRun {
			out = append(out, cur)
		}
		cur = invisibleRun{class: -1}
	}
	for i, r := range s {
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
