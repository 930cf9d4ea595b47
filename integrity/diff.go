package integrity

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines around each change, as in
// diff -u.
const diffContext = 3

// maxDiffCells bounds the work of the line matcher (the product of the two
// middle parts' line counts, after the common head and tail are set
// aside): beyond it the middle is shown as removed then added, which is
// still a correct diff, only a longer one. Tool definitions are a few
// hundred lines pretty-printed; this keeps a pathological one from taking
// seconds or hundreds of megabytes.
const maxDiffCells = 4 << 20

// Diff returns the unified diff of a change: the pinned definition (empty
// for a new tool) against the pending one, both pretty-printed canonical
// JSON. The header names the tool and both fingerprints.
func (c Change) Diff() string {
	var old []byte
	oldName := "/dev/null"
	if c.Pinned != nil {
		old = pretty(c.Pinned.Definition)
		oldName = c.Server + "/" + c.Tool + " pinned " + ShortFingerprint(c.Pinned.Fingerprint)
	}
	newName := c.Server + "/" + c.Tool + " " + string(c.Reason) + " " + ShortFingerprint(c.Pending.Fingerprint)
	return unifiedDiff(oldName, newName, splitLines(string(old)), splitLines(string(pretty(c.Pending.Definition))))
}

// splitLines splits s into lines without their newlines; "" has none.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// edit is one line of an edit script: ' ' kept, '-' removed, '+' added.
type edit struct {
	op   byte
	line string
}

// unifiedDiff writes a diff -u style diff of a and b ("" when equal).
func unifiedDiff(aName, bName string, a, b []string) string {
	script := lineDiff(a, b)
	changed := false
	for _, e := range script {
		if e.op != ' ' {
			changed = true
			break
		}
	}
	if !changed {
		return ""
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	// Group the script into hunks: runs of changes closer than
	// 2*diffContext kept lines share a hunk.
	for i := 0; i < len(script); {
		if script[i].op == ' ' {
			i++
			continue
		}
		start := max(0, i-diffContext)
		end := i
		for j := i; j < len(script); j++ {
			if script[j].op != ' ' {
				end = j + 1
				continue
			}
			if j-end >= 2*diffContext {
				break
			}
		}
		end = min(len(script), end+diffContext)
		aStart, bStart := lineNumbers(script, start)
		aLen, bLen := 0, 0
		for _, e := range script[start:end] {
			if e.op != '+' {
				aLen++
			}
			if e.op != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, e := range script[start:end] {
			out.WriteByte(e.op)
			out.WriteString(e.line)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

// lineNumbers returns the 1-based line numbers in a and b at script
// position pos.
func lineNumbers(script []edit, pos int) (int, int) {
	a, b := 1, 1
	for _, e := range script[:pos] {
		if e.op != '+' {
			a++
		}
		if e.op != '-' {
			b++
		}
	}
	return a, b
}

// hunkRange writes "start,len" as diff -u does: an empty range starts at
// the line before it.
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start-1)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// lineDiff returns an edit script from a to b: the common head and tail,
// and between them a longest common subsequence of lines (or, when the
// middle is too large to match, all of it removed then added).
func lineDiff(a, b []string) []edit {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var script []edit
	for _, l := range a[:head] {
		script = append(script, edit{' ', l})
	}
	am, bm := a[head:len(a)-tail], b[head:len(b)-tail]
	if len(am)*len(bm) > maxDiffCells {
		for _, l := range am {
			script = append(script, edit{'-', l})
		}
		for _, l := range bm {
			script = append(script, edit{'+', l})
		}
	} else {
		script = append(script, lcsScript(am, bm)...)
	}
	for _, l := range a[len(a)-tail:] {
		script = append(script, edit{' ', l})
	}
	return script
}

// lcsScript is the classic dynamic-programming LCS edit script.
func lcsScript(a, b []string) []edit {
	n, m := len(a), len(b)
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []edit
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, edit{' ', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, edit{'-', a[i]})
			i++
		default:
			out = append(out, edit{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, edit{'-', a[i]})
	}
	for ; j < m; j++ {
		out = append(out, edit{'+', b[j]})
	}
	return out
}
