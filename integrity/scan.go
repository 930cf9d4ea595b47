package integrity

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// maxExcerptRunes bounds a finding's excerpt (log lines, tools --json).
const maxExcerptRunes = 120

// excerptContext is how much text around a match an excerpt shows.
const excerptContext = 30

// Finding is one thing the description scan found in what clients would
// see of a tool.
type Finding struct {
	Kind  Kind  `json:"kind"`
	Level Level `json:"level"`
	// Rule names the detector (html_comment, hide_from_user, ...).
	Rule string `json:"rule"`
	// Where is the member the text came from: description, title,
	// annotations.title, inputSchema.properties.<name>.description, ...
	Where string `json:"where"`
	// Excerpt is the matched text with a little context, cleaned for logs
	// (control characters removed, secrets redacted) and cut to 120
	// characters.
	Excerpt string `json:"excerpt"`
	// Stripped is true when scan: strip removed what this finding is
	// about from what clients see.
	Stripped bool `json:"stripped,omitempty"`
}

// scanResult is the scan of one tool object, before cross-server
// references (which depend on the other servers' tools, not on the object).
type scanResult struct {
	findings []Finding
	// words are the identifier-like words of the scanned texts, for the
	// cross-server detector.
	words []word
	// stripped is the object with invisible characters and hidden markup
	// removed from its scanned texts; nil when nothing was removed.
	stripped []byte
	// strippedFindings are the findings that remain in stripped; nil when
	// stripped is nil.
	strippedFindings []Finding
}

// word is one identifier-like token of a scanned text.
type word struct {
	text, where string
}

// scanObject scans one client-visible tool object.
func scanObject(obj []byte) scanResult {
	w := walkers.Get().(*walker)
	defer w.release()
	texts, err := w.collect(obj)
	if err != nil {
		return scanResult{findings: []Finding{{Kind: KindUnreadable, Level: LevelQuarantine, Rule: "unreadable",
			Excerpt: cutRunes(sanitize.Text(err.Error()), maxExcerptRunes)}}}
	}
	var res scanResult
	stripNeeded := false
	for _, t := range texts {
		norm := normalize(t.value)
		fs := scanNormalized(t.where, t.value, norm)
		res.findings = append(res.findings, fs...)
		for _, f := range fs {
			if f.Kind == KindInvisible || isStripRule(f.Rule) {
				stripNeeded = true
			}
		}
		// Schema values are identifiers as often as prose (an enum of
		// tool or field names): they are no cross-server reference.
		if !t.schemaValue {
			n := len(res.words)
			res.words = appendWords(res.words, t.where, norm)
			keepWords(res.words[n:])
		}
	}
	if !stripNeeded {
		return res
	}
	res.stripped, res.strippedFindings = stripObject(obj, texts)
	return res
}

// keepWords gives words (of one text) strings of their own: they are kept
// with the tool's cached scan, and as slices of the text they would keep
// every scanned text of the tool (collect makes them one string).
func keepWords(words []word) {
	if len(words) == 0 {
		return
	}
	where := strings.Clone(words[0].where)
	for i := range words {
		words[i] = word{text: strings.Clone(words[i].text), where: where}
	}
}

// scanText runs every detector but the cross-server one over one text.
func scanText(where, s string) []Finding {
	return scanNormalized(where, s, normalize(s))
}

// scanNormalized is scanText of s whose normalize is norm.
func scanNormalized(where, s, norm string) []Finding {
	return scanDepth(where, s, norm, 0)
}

// scanDepth is scanNormalized of a text found inside depth levels of
// encoding (see encodedFindings).
func scanDepth(where, s, norm string, depth int) []Finding {
	var out []Finding
	// normalize drops or rewrites every invisible character (those that
	// are white space become ' '): a text it leaves as it is has none.
	if norm != s {
		out = invisibleFindings(where, s)
	}
	out = appendPhraseFindings(out, where, norm)
	out = append(out, encodedFindings(where, norm, depth)...)
	// A string has no more runes than bytes: most are not counted.
	if len(s) > maxDescriptionRunes && strings.HasSuffix(where, "description") {
		if n := utf8.RuneCountInString(s); n > maxDescriptionRunes {
			out = append(out, Finding{Kind: KindLongDescription, Level: LevelWarn, Rule: "long_description", Where: where,
				Excerpt: strconv.Itoa(n) + " characters (limit " + strconv.Itoa(maxDescriptionRunes) + ")"})
		}
	}
	return out
}

// appendPhraseFindings adds the findings of the phrase rules on norm.
func appendPhraseFindings(out []Finding, where, norm string) []Finding {
	found, ascii := findHints(norm)
	if found == (hintSet{}) {
		return out // no rule can match (most enum members and titles)
	}
	folded := foldedText{norm: norm, ascii: ascii}
	var matched uint64 // bit i: rules[i] made a finding
	for i := range rules {
		r := &rules[i]
		if r.unlessMask&matched != 0 || !found.anyOf(&r.hintMask) || !folded.containsNeeds(r.needs()) {
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
			matched |= 1 << i
			out = append(out, Finding{Kind: r.kind, Level: r.level, Rule: r.rule, Where: where, Excerpt: excerpt(norm, first)})
		}
	}
	return out
}

// stripObject removes invisible characters and hidden markup from every
// scanned text of obj, keeping every other byte, and scans the result.
func stripObject(obj []byte, texts []text) ([]byte, []Finding) {
	out := make([]byte, 0, len(obj))
	last := 0
	var findings []Finding
	for _, t := range texts {
		clean := t.value
		if !t.schemaValue {
			clean = stripMarkup(stripInvisible(t.value))
		}
		findings = append(findings, scanText(t.where, clean)...)
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

func isStripRule(rule string) bool {
	for i := range rules {
		if rules[i].rule == rule {
			return rules[i].strip
		}
	}
	return false
}

// excerpt cuts the text around loc, cleaned for logs.
func excerpt(s string, loc []int) string {
	start, end := loc[0], loc[1]
	for n := 0; start > 0 && n < excerptContext; n++ {
		_, size := utf8.DecodeLastRuneInString(s[:start])
		start -= size
	}
	for n := 0; end < len(s) && n < excerptContext; n++ {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
	}
	e := sanitize.Text(s[start:end])
	if start > 0 {
		e = "…" + e
	}
	if end < len(s) {
		e += "…"
	}
	return cutRunes(e, maxExcerptRunes)
}

// cutRunes cuts s to at most n runes, the last being "…" when cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// trimDots is strings.Trim(w, ".-") without building a cutset per call.
func trimDots(w string) string {
	for w != "" && (w[0] == '.' || w[0] == '-') {
		w = w[1:]
	}
	for w != "" && (w[len(w)-1] == '.' || w[len(w)-1] == '-') {
		w = w[:len(w)-1]
	}
	return w
}

// appendWords adds the identifier-like words of s: runs of letters,
// digits, '_', '-' and '.', without leading or trailing '.' and '-'. Only
// distinctive words can name another server's tool (see Peers); the rest
// are not kept. A word without a '_', '-', '.' or capital after its first
// byte is not distinctive, trimmed or not: only the words around such a
// byte are looked at.
func appendWords(out []word, where, s string) []word {
	for i := 1; i < len(s); i++ {
		if wordBytes[s[i]] != wordSpecial || wordBytes[s[i-1]] == 0 {
			continue
		}
		start, end := i-1, i+1
		for start > 0 && wordBytes[s[start-1]] != 0 {
			start--
		}
		for end < len(s) && wordBytes[s[end]] != 0 {
			end++
		}
		if w := trimDots(s[start:end]); distinctive(w) {
			out = append(out, word{text: w, where: where})
		}
		i = end
	}
	return out
}

// Classes of wordBytes.
const (
	wordPlain   = 1 // a lower-case letter or a digit
	wordSpecial = 2 // '_', '-', '.' or a capital
)

// wordBytes classes the bytes of words; 0 is any other byte.
var wordBytes = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			t[c] = wordPlain
		case c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c == '.':
			t[c] = wordSpecial
		}
	}
	return t
}()
