package sanitize

import (
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// MinSecretLen is the shortest secret value a Scrubber replaces. Shorter
// values ("1", "true", "info", "8080", "debug") would shred ordinary words and
// numbers in every log line, and a secret that short is guessable anyway.
const MinSecretLen = 6

// maxPasses bounds the replace-until-stable loop. Every pass replaces at
// least one occurrence holding a byte that no marker produced, so the loop
// ends on its own; the bound only makes a bug fail closed.
const maxPasses = 64

// Scrubber replaces known secret values (the configuration's environment
// values, header values and tokens) wherever they appear, then applies Text.
//
// Each secret is looked for as given, without its control characters, URL
// encoded (query and path escaping) and JSON escaped (as zerolog and as
// encoding/json write it); inside a JSON log line, each of these forms is
// also looked for JSON-escaped. Values shorter than MinSecretLen bytes are
// ignored. A nil *Scrubber knows no secrets. A Scrubber is immutable and
// safe for concurrent use.
type Scrubber struct {
	text forms // looked for in plain text and outside JSON strings
	json forms // looked for inside JSON strings: valid escaped content only
}

// forms holds search strings grouped by their first byte, longest first, so
// that the longest secret wins when one is a prefix of another.
type forms struct {
	byFirst [256][]string
	// starts has bit a<<8|b set when a form starts with the bytes a, b:
	// every form is at least MinSecretLen bytes long, so none can start
	// where the next two bytes are not such a pair, and match rejects
	// most positions with one bit test.
	starts [1 << 16 / 64]uint64
	n      int
}

func (f *forms) add(s string) {
	if len(s) < MinSecretLen || isMarkerPart(s) || slices.Contains(f.byFirst[s[0]], s) {
		return
	}
	f.byFirst[s[0]] = append(f.byFirst[s[0]], s)
	k := uint(s[0])<<8 | uint(s[1])
	f.starts[k>>6] |= 1 << (k & 63)
	f.n++
}

func (f *forms) sort() {
	for i := range f.byFirst {
		slices.SortStableFunc(f.byFirst[i], func(a, b string) int { return len(b) - len(a) })
	}
}

// match returns the form found at the start of s, or "".
func (f *forms) match(s string) string {
	if len(s) < MinSecretLen {
		return "" // shorter than any form
	}
	if k := uint(s[0])<<8 | uint(s[1]); f.starts[k>>6]&(1<<(k&63)) == 0 {
		return ""
	}
	for _, c := range f.byFirst[s[0]] {
		if strings.HasPrefix(s, c) {
			return c
		}
	}
	return ""
}

// NewScrubber returns a Scrubber for secrets. Empty and short values are
// skipped, as is a value made only of marker text ("ACTED][RED"), which could
// not be told apart from the markers themselves.
func NewScrubber(secrets []string) *Scrubber {
	sc := &Scrubber{}
	for _, secret := range secrets {
		if len(secret) < MinSecretLen {
			continue
		}
		textForms := []string{
			secret, clean(secret),
			zerologEscape(secret), marshalEscape(secret),
			url.QueryEscape(secret), url.PathEscape(secret),
		}
		for _, f := range textForms {
			sc.text.add(f)
			// Inside a JSON string each form appears escaped once more
			// (an error text quoting a JSON body, say), and is matched
			// after the escapes Text would remove are gone.
			sc.json.add(cleanEscapes(zerologEscape(f)))
			sc.json.add(cleanEscapes(marshalEscape(f)))
		}
	}
	sc.text.sort()
	sc.json.sort()
	return sc
}

// Text replaces every known secret in s with Redacted and applies the
// package's Text. The result holds none of the secrets' forms.
func (sc *Scrubber) Text(s string) string {
	s = clean(s)
	if sc == nil || sc.text.n == 0 {
		return Text(s)
	}
	s = replaceAll(s, &sc.text, false)
	t := redactSecrets(dropURLQueries(s))
	if t != s {
		// Dropping a query can join what it separated; look again.
		t = replaceAll(t, &sc.text, false)
	}
	return t
}

// Writer returns an io.Writer that scrubs every Write and passes the result
// to w in one Write. zerolog writes one event per Write, so each log line is
// scrubbed whole. A Write that is one JSON object (zerolog's format) stays
// valid JSON: secrets inside strings become the marker, a secret that is a
// bare number or literal becomes the string "[REDACTED]". Other text gets
// Scrubber.Text. In both, the bidirectional controls and U+2028, U+2029
// are written as \u escapes (in JSON, the same string). Write reports len(p) on success so callers see no short
// write. The returned writer is as safe for concurrent use as w is.
func (sc *Scrubber) Writer(w io.Writer) io.Writer {
	return &scrubWriter{sc: sc, w: w}
}

type scrubWriter struct {
	sc *Scrubber
	w  io.Writer
}

func (sw *scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(sw.w, sw.sc.logLine(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// logLine scrubs one log line. Unlike Text, which keeps them for the text
// that reaches MCP clients, it also escapes the bidirectional controls
// (see escapeLogControls): a log line is read on a terminal, where one
// would reorder what follows it.
func (sc *Scrubber) logLine(s string) string {
	if !strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "{") {
		x := sc.Text(s)
		if t := escapeLogControls(x); t != x {
			return sc.Text(t) // so that no escape completes a secret
		}
		return x
	}
	return sc.logJSON(s)
}

// logJSON is logLine's scrub of JSON text: Text's rules, but no
// redaction runs past the end of the JSON string it starts in (see
// jsonText), so the line keeps every member. Text that only looks like
// JSON (it starts with '{') keeps plain text's rules.
func (sc *Scrubber) logJSON(s string) string {
	x := sc.scrubJSON(s)
	var js jsonText
	t := dropURLQueries(clean(x))
	y := redact(t, &js)
	if js.bounded && !json.Valid([]byte(t)) {
		y = redactSecrets(t)
	}
	if y != x {
		y = sc.scrubJSON(y)
	}
	return escapeLogControls(y)
}

// scrubJSON cleans the strings of a JSON text: escaped control characters
// (the JSON spelling of what Text removes) are dropped and secrets become
// the marker; a bare token (number, literal) holding a secret becomes a
// marker string.
func (sc *Scrubber) scrubJSON(s string) string {
	secrets := sc != nil && sc.text.n > 0
	if !secrets && strings.IndexByte(s, '\\') < 0 {
		return s
	}
	ed := edits{s: s}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			e := jsonStringEnd(s, i+1)
			content := s[i+1 : e]
			r := cleanEscapes(content)
			if secrets {
				r = replaceAll(r, &sc.json, true)
			}
			if r != content {
				ed.replace(i+1, e, r)
			}
			i = e + 1
		case isBareJSON(c):
			e := i
			for e < len(s) && isBareJSON(s[e]) {
				e++
			}
			if tok := s[i:e]; secrets && replaceAll(tok, &sc.text, false) != tok {
				ed.replace(i, e, `"`+Redacted+`"`)
			}
			i = e
		default:
			i++
		}
	}
	return ed.String()
}

// cleanEscapes drops, from the content of a JSON string, the escapes that
// spell what Text removes: \r, \b, \f, \u00XX for a C0 control other than
// tab and newline, DEL and the C1 controls, an escaped ESC with the rest of
// its CSI sequence, and TAG characters written as surrogate pairs. It also
// writes \ufffd (zerolog's spelling of invalid UTF-8) as the rune itself,
// so that a secret matches however its invalid bytes were spelled.
func cleanEscapes(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	ed := edits{s: s}
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			i++
			continue
		}
		n, repl, change := escapeUnit(s, i)
		if change {
			ed.replace(i, i+n, repl)
		}
		i += n
	}
	return ed.String()
}

// escapeUnit measures the escape at s[i] == '\\' and says what replaces it.
func escapeUnit(s string, i int) (n int, repl string, change bool) {
	if i+1 >= len(s) {
		return 1, "", false
	}
	switch s[i+1] {
	case 'r', 'b', 'f':
		return 2, "", true
	case 'u':
	default:
		return 2, "", false
	}
	v, ok := hex4(s, i+2)
	if !ok {
		return 2, "", false
	}
	switch {
	case v == 0x1B:
		return 6 + csiLen(s, i+6), "", true
	case (v < 0x20 && v != '\n' && v != '\t') || v == 0x7F || isC1(rune(v)):
		return 6, "", true
	case v == utf8.RuneError:
		return 6, string(utf8.RuneError), true
	case v == 0xDB40 && strings.HasPrefix(s[i+6:], `\udc`):
		// U+E0000..U+E007F is the pair \udb40 \udc00..\udc7f.
		if lo, ok := hex4(s, i+8); ok && lo >= 0xDC00 && lo <= 0xDC7F {
			return 12, "", true
		}
	}
	return 6, "", false
}

// csiLen returns the length of the CSI remainder ("[31m") at s[j], or 0.
func csiLen(s string, j int) int {
	if j >= len(s) || s[j] != '[' {
		return 0
	}
	k := j + 1
	for k < len(s) && s[k] >= 0x30 && s[k] <= 0x3F {
		k++
	}
	for k < len(s) && s[k] >= 0x20 && s[k] <= 0x2F && s[k] != '"' {
		k++
	}
	if k < len(s) && s[k] >= 0x40 && s[k] <= 0x7E && s[k] != '\\' {
		return k + 1 - j
	}
	return 0
}

// hex4 parses four hex digits at s[j].
func hex4(s string, j int) (int, bool) {
	if j+4 > len(s) {
		return 0, false
	}
	v := 0
	for _, c := range []byte(s[j : j+4]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case (c|0x20) >= 'a' && (c|0x20) <= 'f':
			v = v<<4 | int((c|0x20)-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// jsonStringEnd returns the index of the quote closing a JSON string whose
// content starts at from, or len(s).
func jsonStringEnd(s string, from int) int {
	for i := from; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(s)
}

// isBareJSON reports a byte of a JSON number or literal (anything but
// structure, strings and white space).
func isBareJSON(c byte) bool {
	switch c {
	case '{', '}', '[', ']', ',', ':', '"', ' ', '\t', '\r', '\n':
		return false
	}
	return true
}

// replaceAll replaces the forms in s until none is left. With escaped set,
// s is the content of a JSON string: matches start only at the start of an
// escape unit, so an escape such as `\n` is never split.
func replaceAll(s string, f *forms, escaped bool) string {
	for pass := 0; pass < maxPasses; pass++ {
		r, changed := replaceOnce(s, f, escaped)
		if !changed {
			return r
		}
		s = r
	}
	return Redacted
}

func replaceOnce(s string, f *forms, escaped bool) (string, bool) {
	if f.n == 0 {
		return s, false
	}
	ed := edits{s: s}
	for i := 0; i < len(s); {
		if m := f.match(s[i:]); m != "" {
			ed.replace(i, i+len(m), Redacted)
			i += len(m)
			continue
		}
		if escaped && s[i] == '\\' {
			if i+1 < len(s) && s[i+1] == 'u' {
				i += min(6, len(s)-i)
			} else {
				i += min(2, len(s)-i)
			}
			continue
		}
		i++
	}
	return ed.String(), ed.out != nil
}

// isMarkerPart reports whether s occurs inside a run of markers.
func isMarkerPart(s string) bool {
	return strings.Contains(strings.Repeat(Redacted, len(s)/len(Redacted)+2), s)
}

// zerologEscape escapes s the way zerolog writes a string value: '"' and
// '\\' and the C0 controls and DEL escaped, invalid UTF-8 as \ufffd.
func zerologEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString(`\ufffd`)
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20 || c == 0x7F:
			WriteEscape(&b, rune(c))
		default:
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

// marshalEscape escapes s the way encoding/json does (HTML characters and
// U+2028/U+2029 as \uXXXX), without the surrounding quotes.
func marshalEscape(s string) string {
	b, err := json.Marshal(s)
	if err != nil || len(b) < 2 {
		return s
	}
	return string(b[1 : len(b)-1])
}

// LogLine scrubs s, one log line, as Writer scrubs a Write: a JSON object
// stays valid JSON with secrets in its strings replaced, each replacement
// ending at the end of the string it starts in at the latest, so that
// every member stays (a value under a secret key's member name is
// replaced whole). Other text gets Scrubber.Text; the bidirectional
// controls, U+2028 and U+2029 are escaped. It returns s itself when
// nothing changes.
func (sc *Scrubber) LogLine(s string) string { return sc.logLine(s) }

// LogValue scrubs s, one JSON value (a string, number, literal, array or
// object) of a log line that is a JSON object, so that a writer of such
// lines need not scrub the parts it wrote itself. A line whose other bytes
// LogLine leaves as they are (member names, and values that hold no secret
// shape and, see Inert, no configured secret) becomes, with each such value
// replaced by LogValue's, the very bytes LogLine makes of it: every pattern
// LogLine looks for starts inside one JSON value there and, since a
// redaction ends at the end of the string it starts in at the latest, ends
// inside it too.
func (sc *Scrubber) LogValue(s string) string { return sc.logJSON(s) }

// Inert reports whether LogLine would find no configured secret in the
// parts of a JSON log line that are texts of fixed or those made only of
// the bytes of one of alphabets: it looks for secrets in each string and
// each bare value (number, literal) of a line alone, so a secret is found
// in one of those only when one of its forms occurs in a fixed text, or
// is made of an alphabet's bytes. A nil Scrubber knows no secret.
func (sc *Scrubber) Inert(fixed []string, alphabets ...string) bool {
	if sc == nil {
		return true
	}
	ins := make([][256]bool, len(alphabets))
	for k, a := range alphabets {
		for i := range len(a) {
			ins[k][a[i]] = true
		}
	}
	for _, f := range []*forms{&sc.text, &sc.json} {
		for _, list := range f.byFirst {
			for _, form := range list {
				for _, t := range fixed {
					if strings.Contains(t, form) {
						return false
					}
				}
				for k := range ins {
					if allIn(form, &ins[k]) {
						return false
					}
				}
			}
		}
	}
	return true
}

// allIn reports whether every byte of s is marked in in.
func allIn(s string, in *[256]bool) bool {
	for i := range len(s) {
		if !in[s[i]] {
			return false
		}
	}
	return true
}
