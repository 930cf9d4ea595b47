package sanitize

import "testing"

func TestTerminal(t *testing.T) {
	tests := []struct {
		name, in, want, line string // line: TerminalLine's result
	}{
		{"plain", "Search repositories (日本語 ok)", "Search repositories (日本語 ok)", "Search repositories (日本語 ok)"},
		{"ESC clears the screen", "d\x1b[2J", `d\u001b[2J`, `d\u001b[2J`},
		{"BEL and NUL", "a\x07b\x00", `a\u0007b\u0000`, `a\u0007b\u0000`},
		{"DEL", "a\x7f", `a\u007f`, `a\u007f`},
		{"C1 CSI and NEL", "a\u009b2Jb\u0085", `a\u009b2Jb\u0085`, `a\u009b2Jb\u0085`},
		{"bidi override", "admin\u202Egpj.exe", `admin\u202egpj.exe`, `admin\u202egpj.exe`},
		{"bidi isolates and marks", "\u2066a\u2069\u200e\u200f\u061c", `\u2066a\u2069\u200e\u200f\u061c`, `\u2066a\u2069\u200e\u200f\u061c`},
		{"line separators", "a\u2028b\u2029", `a\u2028b\u2029`, `a\u2028b\u2029`},
		{"newline and tab", "a\n\tb\r", "a\n\tb\\r", `a\n\tb\r`},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb", "a\uFFFDb"},
		{"zero-width joiner stays", "👩\u200d💻", "👩\u200d💻", "👩\u200d💻"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Terminal(tt.in); got != tt.want {
				t.Errorf("Terminal(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := TerminalLine(tt.in); got != tt.line {
				t.Errorf("TerminalLine(%q) = %q, want %q", tt.in, got, tt.line)
			}
		})
	}
}
