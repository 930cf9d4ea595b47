package main

import (
	"io"
	"strings"
	"unicode"

	"golang.org/x/text/width"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// table lays out lines of cells for a terminal. Lines belong to groups:
// the columns of a group are as wide as the widest cell of that column in
// the group, measured in terminal cells (a wide CJK character takes two,
// a combining mark none), so that the groups of `tools` (servers, tools)
// each line up while their lines interleave. Every cell is escaped with
// sanitize.TerminalLine first: upstream text cannot move the cursor,
// reorder the line or break a column. The last cell of a line is not
// padded.
type table struct {
	lines []tableLine
}

type tableLine struct {
	group  int
	indent string
	cells  []string // escaped
}

// add appends a line of group, after indent.
func (t *table) add(group int, indent string, cells ...string) {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = sanitize.TerminalLine(c)
	}
	t.lines = append(t.lines, tableLine{group: group, indent: indent, cells: esc})
}

// write prints the table; columns are separated by two spaces.
func (t *table) write(w io.Writer) error {
	widths := map[int][]int{}
	for _, l := range t.lines {
		ws := widths[l.group]
		for i := 0; i < len(l.cells)-1; i++ {
			if i == len(ws) {
				ws = append(ws, 0)
			}
			ws[i] = max(ws[i], displayWidth(l.cells[i]))
		}
		widths[l.group] = ws
	}
	var b strings.Builder
	for _, l := range t.lines {
		b.WriteString(l.indent)
		for i, c := range l.cells {
			b.WriteString(c)
			if i < len(l.cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[l.group][i]-displayWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// displayWidth is the number of terminal cells s takes: East Asian wide
// and fullwidth characters take two, combining marks and format
// characters (zero-width joiners) none, every other character one.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	switch {
	case r < 0x300:
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// cutWidth returns the first line of s cut to at most max terminal cells,
// ending with "…" when it was cut.
func cutWidth(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if displayWidth(s) <= max {
		return s
	}
	n := 0
	for i, r := range s {
		if n+runeWidth(r) > max-1 {
			return s[:i] + "…"
		}
		n += runeWidth(r)
	}
	return s
}
