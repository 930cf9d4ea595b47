package sanitize

import (
	"strings"
	"unicode/utf8"
)

// Terminal returns s made safe to print on a terminal, with nothing
// removed, so that a reader sees what an upstream sent: C0 controls other
// than newline and tab, DEL, the C1 controls, the bidirectional formatting
// characters (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) and
// the line and paragraph separators U+2028 and U+2029 are written as
// escapes ("\u001b", "\u202e"; carriage return as "\r"), and invalid UTF-8
// as U+FFFD. An ESC can no longer start a sequence that clears the screen
// or retitles the window, nor a bidi control reorder what follows it.
// Terminal returns s itself when nothing needs escaping. The CLI prints
// every text that comes from an upstream through it or TerminalLine.
func Terminal(s string) string { return terminal(s, false) }

// TerminalLine is Terminal for one line or one table cell: newline and
// tab are escaped too ("\n", "\t"), so that the text cannot break a line
// or a column.
func TerminalLine(s string) string { return terminal(s, true) }

func terminal(s string, oneLine bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if terminalEscape(r, size, oneLine) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case !terminalEscape(r, size, oneLine):
			b.WriteRune(r)
		case r == utf8.RuneError:
			b.WriteRune(utf8.RuneError)
		default:
			WriteEscape(&b, r)
		}
	}
	return b.String()
}

// terminalEscape reports whether the rune r (size bytes, RuneError with
// size 1 for an invalid byte) is written escaped.
func terminalEscape(r rune, size int, oneLine bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return oneLine
	case r < 0x20 || r == 0x7F || isC1(r):
		return true
	case r == utf8.RuneError:
		return size == 1
	}
	return isBidiControl(r) || r == '\u2028' || r == '\u2029'
}

// isBidiControl reports the characters that change the direction of the
// text around them (Unicode's Bidi_Control property).
func isBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// escapeLogControls writes the bidirectional formatting characters and the
// line and paragraph separators of s as the escapes Terminal uses
// ("\u202e"), so that a log line read on a terminal cannot be reordered.
// In a JSON text these characters can only stand inside strings, where
// the escape is the same string to every JSON reader. It returns s itself
// when s holds none of them.
func escapeLogControls(s string) string {
	// Each of them is encoded starting with 0xD8 (U+061C) or 0xE2.
	if strings.IndexByte(s, 0xE2) < 0 && strings.IndexByte(s, 0xD8) < 0 {
		return s
	}
	if !strings.ContainsFunc(s, isLogEscape) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		if isLogEscape(r) {
			writeUEscape(&b, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLogEscape(r rune) bool { return isBidiControl(r) || r == '\u2028' || r == '\u2029' }

// WriteEscape writes r, a character of the Basic Multilingual Plane, as
// the backslash escape that JSON strings, YAML's double-quoted scalars and
// Terminal share: newline, tab and carriage return as \n, \t and \r, any
// other as \uXXXX.
func WriteEscape(b *strings.Builder, r rune) {
	switch r {
	case '\n':
		b.WriteString(`\n`)
	case '\t':
		b.WriteString(`\t`)
	case '\r':
		b.WriteString(`\r`)
	default:
		writeUEscape(b, r)
	}
}

// writeUEscape writes r, a rune of the Basic Multilingual Plane, as \uXXXX.
func writeUEscape(b *strings.Builder, r rune) {
	const hex = "0123456789abcdef"
	b.WriteString(`\u`)
	b.WriteByte(hex[r>>12&0xF])
	b.WriteByte(hex[r>>8&0xF])
	b.WriteByte(hex[r>>4&0xF])
	b.WriteByte(hex[r&0xF])
}
