package upstream

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// npx404 is what `npx -y @modelcontextprotocol/server-doesnotexist-xyz`
// wrote on stderr (npm 11.19), with the registry's host replaced by
// REGISTRY_HOST and the cache path by /home/me/.npm.
const npx404 = "testdata/npx-404.stderr"

// npx404Cause is what a user must see of it: the error code and the line
// that names the package.
var npx404Cause = []string{
	"npm error code E404",
	"npm error 404 Not Found - GET https://REGISTRY_HOST/@modelcontextprotocol%2fserver-doesnotexist-xyz",
}

// TestStderrTailKeepsCause: the summary of a mistyped npx package keeps
// npm's first error lines (the code, the package's URL) although eleven
// more lines follow them, then the last lines, within stderrTailRunes.
func TestStderrTailKeepsCause(t *testing.T) {
	data, err := os.ReadFile(npx404)
	if err != nil {
		t.Fatal(err)
	}
	var tail stderrTail
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			tail.add(l)
		}
	}
	got := tail.text()
	want := strings.Join(npx404Cause, " | ") + " | … | …"
	if !strings.HasPrefix(got, want) {
		t.Errorf("text =\n%s\nwant it to start with\n%s", got, want)
	}
	if !strings.HasSuffix(got, "/home/me/.npm/_logs/2026-12-07T05_25_40_151Z-debug-0.log") {
		t.Errorf("text %q lost the last line", got)
	}
	if n := utf8.RuneCountInString(got); n != stderrTailRunes {
		t.Errorf("text is %d runes, want %d (the bound, filled)", n, stderrTailRunes)
	}
}

// TestStderrTailCauses: which lines count as the cause, and that a cause
// still among the last lines is not repeated.
func TestStderrTailCauses(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"no error words: the last lines", []string{"a", "b", "c", "d", "e", "f", "g"}, "c | d | e | f | g"},
		{"cause still in the last lines", []string{"x", "Error: boom", "y"}, "x | Error: boom | y"},
		{"python traceback", []string{"Traceback (most recent call last):", "  File x", "  File y", "  File z", "a", "b", "ModuleNotFoundError: No module named 'mcp'"},
			"Traceback (most recent call last): | … |   File y |   File z | a | b | ModuleNotFoundError: No module named 'mcp'"},
		{"go panic right before the last lines", []string{"panic: nil map", "1", "2", "3", "4", "5"}, "panic: nil map | 1 | 2 | 3 | 4 | 5"},
		{"only the first two causes", []string{"npm ERR! one", "npm ERR! two", "npm ERR! three", "1", "2", "3", "4", "5"},
			"npm ERR! one | npm ERR! two | … | 1 | 2 | 3 | 4 | 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tail stderrTail
			for _, l := range tt.lines {
				tail.add(l)
			}
			if got := tail.text(); got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStderrTailCauseWindow: the causes are the first error lines of the
// child's last moments (stderrTailCauseWindow before its last line), so a
// failure at start keeps npm's cause while a server that logged an error
// long ago and crashed later shows its crash, not the old error.
func TestStderrTailCauseWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	type line struct {
		after time.Duration // since t0
		text  string
	}
	at := func(d time.Duration, texts ...string) []line {
		var ls []line
		for _, s := range texts {
			ls = append(ls, line{d, s})
		}
		return ls
	}
	npx, err := os.ReadFile(npx404)
	if err != nil {
		t.Fatal(err)
	}
	npxLines := strings.Split(strings.TrimSpace(string(npx)), "\n")
	var twenty []string
	for i := range 20 {
		twenty = append(twenty, fmt.Sprintf("Error: retry %d", i))
	}
	tests := []struct {
		name  string
		lines []line
		want  string
	}{
		{"start failure over three seconds: npm's cause kept",
			slices.Concat(at(0, npxLines[:2]...), at(3*time.Second, npxLines[2:]...)),
			strings.Join(npx404Cause, " | ") + " | … | …"},
		{"long run, then a silent end: the last lines only",
			slices.Concat(at(0, "Error: rate limited", "retrying"), at(time.Hour, "ok 1", "ok 2", "ok 3", "ok 4", "ok 5", "ok 6")),
			"ok 2 | ok 3 | ok 4 | ok 5 | ok 6"},
		{"long run, then a crash: the crash's first error line",
			slices.Concat(at(0, "Error: rate limited", "retrying"),
				at(time.Hour, "serving", "Traceback (most recent call last):", "  File a", "  File b", "  File c", "  File d", "ValueError: boom")),
			"Traceback (most recent call last): |   File a |   File b |   File c |   File d | ValueError: boom"},
		{"a cause the window's length before the last line is kept",
			slices.Concat(at(0, "Error: bad token"), at(stderrTailCauseWindow, "1", "2", "3", "4", "5")),
			"Error: bad token | 1 | 2 | 3 | 4 | 5"},
		{"a cause just older than the window is not",
			slices.Concat(at(0, "Error: bad token"), at(stderrTailCauseWindow+time.Millisecond, "1", "2", "3", "4", "5")),
			"1 | 2 | 3 | 4 | 5"},
		{"more error lines than are kept: the first of the latest",
			slices.Concat(at(0, twenty...), at(time.Second, "1", "2", "3", "4", "5")),
			"Error: retry 4 | Error: retry 5 | … | 1 | 2 | 3 | 4 | 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now time.Time
			tail := stderrTail{now: func() time.Time { return now }}
			for _, l := range tt.lines {
				now = t0.Add(l.after)
				tail.add(l.text)
			}
			if got := tail.text(); !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(tt.want, "…") && got != tt.want {
				t.Errorf("text =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestStdioMistypedNpxPackage: a child that writes npx's 404 and exits
// fails its connection with an error (what `tools`, the status page and
// clients show) that names the package and the error code.
func TestStdioMistypedNpxPackage(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs(npx404)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fakeServer(t, "npx404")
	cfg.Command, cfg.Args = "sh", []string{"-c", `cat "$0" >&2; exit 1`, abs}
	c := start(t, cfg, Options{})
	s := c.Snapshot()
	if s.State != StateFailed || s.Err == nil {
		t.Fatalf("state %s err %v", s.State, s.Err)
	}
	for _, want := range npx404Cause {
		if !strings.Contains(s.Err.Error(), want) {
			t.Errorf("error %q lacks %q", s.Err, want)
		}
	}
}
