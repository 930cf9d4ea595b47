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
	const hex = "0123456789abcdef"
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
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		default:
			b.WriteString(`\u`)
			b.WriteByte(hex[r>>12&0xF])
			b.WriteByte(hex[r>>8&0xF])
			b.WriteByte(hex[r>>4&0xF])
			b.WriteByte(hex[r&0xF])
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
