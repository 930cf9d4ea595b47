package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

// repo is the repository's root as the tests see it: they run in docs/.
var repo = os.DirFS("..")

// maxReadmeLines bounds README.md: it holds what a new user needs in the
// first ten minutes; everything else has a page under docs/.
const maxReadmeLines = 300

// walkFiles calls fn for every file of fsys whose name ends in one of exts,
// skipping hidden folders, node_modules (npm's packages, not ours) and
// testdata folders (fixtures, some broken on purpose).
func walkFiles(fsys fs.FS, exts []string, fn func(name string, data []byte) error) error {
	return fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			base := d.Name()
			if name != "." && (strings.HasPrefix(base, ".") || base == "node_modules" || base == "testdata") {
				return fs.SkipDir
			}
			return nil
		}
		if !slices.Contains(exts, path.Ext(name)) {
			return nil
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		return fn(name, data)
	})
}

var (
	fenceRE     = regexp.MustCompile("^\\s*(```|~~~)")
	headingRE   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	codeSpanRE  = regexp.MustCompile("`+[^`]*`+")
	linkRE      = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineLinkR = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// markdownLines returns the lines of a Markdown document outside fenced
// code blocks, each with its 1-based line number.
func markdownLines(data []byte) (lines []string, numbers []int) {
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if fenceRE.MatchString(l) {
			in = !in
			continue
		}
		if !in {
			lines = append(lines, l)
			numbers = append(numbers, n)
		}
	}
	return lines, numbers
}

// slug is GitHub's anchor for a heading's text: lower case, everything but
// letters, digits, marks, spaces, hyphens and underscores dropped, spaces
// turned into hyphens.
func slug(heading string) string {
	heading = inlineLinkR.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors returns the set of heading anchors of a Markdown document, with
// GitHub's -1, -2 … suffixes for repeated headings.
func anchors(data []byte) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	lines, _ := markdownLines(data)
	for _, l := range lines {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			set[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			set[s] = true
		}
		seen[s]++
	}
	return set
}

// resolve checks one relative reference target (a file, a file#anchor or
// #anchor) made from the file from.
func resolve(fsys fs.FS, from, target string) error {
	file, anchor, _ := strings.Cut(target, "#")
	name := from
	if file != "" {
		name = path.Join(path.Dir(from), file)
		if strings.HasPrefix(name, "../") || name == ".." {
			return fmt.Errorf("%s leaves the repository", target)
		}
		info, err := fs.Stat(fsys, name)
		if err != nil {
			return fmt.Errorf("%s: no such file", target)
		}
		if info.IsDir() && anchor != "" {
			return fmt.Errorf("%s: an anchor on a folder", target)
		}
	}
	if anchor == "" {
		return nil
	}
	if path.Ext(name) != ".md" {
		return fmt.Errorf("%s: an anchor in a file that is not Markdown", target)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	if !anchors(data)[anchor] {
		return fmt.Errorf("%s: %s has no heading with the anchor #%s", target, name, anchor)
	}
	return nil
}

// brokenLinks lists every relative link or image of every Markdown file of
// fsys that does not resolve, as "file:line: problem".
func brokenLinks(fsys fs.FS) ([]string, error) {
	var bad []string
	err := walkFiles(fsys, []string{".md"}, func(name string, data []byte) error {
		lines, numbers := markdownLines(data)
		for i, l := range lines {
			for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				if err := resolve(fsys, name, target); err != nil {
					bad = append(bad, fmt.Sprintf("%s:%d: %v", name, numbers[i], err))
				}
			}
		}
		return nil
	})
	return bad, err
}

// citeRE matches a citation of a docs page in Go code: docs/<page>.md with
// an optional #anchor.
var citeRE = regexp.MustCompile(`\bdocs/[A-Za-z0-9_-]+\.md(#[A-Za-z0-9_-]+)?`)

// brokenCitations lists every docs/<page>.md[#anchor] cited in a Go file of
// fsys (comments and strings alike) that does not resolve. The Go files of
// docs/ itself are skipped: they are these tests, whose cases cite missing
// pages on purpose.
func brokenCitations(fsys fs.FS) ([]string, error) {
	var bad []string
	err := walkFiles(fsys, []string{".go"}, func(name string, data []byte) error {
		if path.Dir(name) == "docs" {
			return nil
		}
		for n, l := range strings.Split(string(data), "\n") {
			for _, c := range citeRE.FindAllString(l, -1) {
				if err := resolve(fsys, ".", c); err != nil {
					bad = append(bad, fmt.Sprintf("%s:%d: %v", name, n+1, err))
				}
			}
		}
		return nil
	})
	return bad, err
}

// specMarker is how the internal product specification, which users do not
// have, used to be cited. It is built from two pieces so that this file
// does not cite it itself.
var specMarker = "SPEC " + "§"

// specCitations lists every line of a Go or Markdown file of fsys that
// cites the internal product specification.
func specCitations(fsys fs.FS) ([]string, error) {
	var bad []string
	err := walkFiles(fsys, []string{".go", ".md"}, func(name string, data []byte) error {
		for n, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, specMarker) {
				bad = append(bad, fmt.Sprintf("%s:%d: %s", name, n+1, strings.TrimSpace(l)))
			}
		}
		return nil
	})
	return bad, err
}

// readmeLines counts the lines of README.md in fsys.
func readmeLines(fsys fs.FS) (int, error) {
	data, err := fs.ReadFile(fsys, "README.md")
	if err != nil {
		return 0, err
	}
	return strings.Count(string(data), "\n"), nil
}

// TestRepository runs every check on the repository itself.
func TestRepository(t *testing.T) {
	checks := []struct {
		name string
		run  func(fs.FS) ([]string, error)
	}{
		{"every relative link in every Markdown file resolves", brokenLinks},
		{"every docs page cited by the Go code resolves", brokenCitations},
		{"nothing cites the internal specification", specCitations},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			bad, err := c.run(repo)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
	t.Run("README.md is short", func(t *testing.T) {
		n, err := readmeLines(repo)
		if err != nil {
			t.Fatal(err)
		}
		if n > maxReadmeLines {
			t.Errorf("README.md has %d lines, more than %d: move the detail into a page under docs/", n, maxReadmeLines)
		}
	})
}

// TestChecksCatchBreakage runs each check on small trees, each broken in
// one way, and on their repaired twins, so that a check that could not
// fail would show here.
func TestChecksCatchBreakage(t *testing.T) {
	page := "# Agents\n\n## Over HTTP\n\n## Names\n\n## Names\n\n```md\n# Not a heading\n[in code](gone.md)\n```\n"
	tests := []struct {
		name  string
		check func(fs.FS) ([]string, error)
		files fstest.MapFS
		want  []string // substrings of the problems reported, in order; none for a sound tree
	}{
		{
			name: "links: sound", check: brokenLinks,
			files: fstest.MapFS{
				"README.md":      {Data: []byte("[a](docs/agents.md#over-http) [b](docs/agents.md#names-1) ![p](docs/p.png) [c](#top) [x](https://example.com/#nope) `[d](gone.md)`\n\n# Top\n")},
				"docs/agents.md": {Data: []byte(page + "[up](../README.md#top) [self](#names)\n")},
				"docs/p.png":     {Data: []byte("png")},
			},
		},
		{
			name: "links: missing file", check: brokenLinks,
			files: fstest.MapFS{"README.md": {Data: []byte("see [cli](docs/cli.md)\n")}},
			want:  []string{"README.md:1: docs/cli.md: no such file"},
		},
		{
			name: "links: missing anchor", check: brokenLinks,
			files: fstest.MapFS{
				"README.md":      {Data: []byte("\n[a](docs/agents.md#over-https)\n")},
				"docs/agents.md": {Data: []byte(page)},
			},
			want: []string{"README.md:2: docs/agents.md#over-https: docs/agents.md has no heading with the anchor #over-https"},
		},
		{
			name: "links: heading only in a code block", check: brokenLinks,
			files: fstest.MapFS{"docs/agents.md": {Data: []byte(page + "[x](#not-a-heading)\n")}},
			want:  []string{"#not-a-heading: docs/agents.md has no heading"},
		},
		{
			name: "links: a third repeated heading", check: brokenLinks,
			files: fstest.MapFS{"docs/agents.md": {Data: []byte(page + "[x](#names-2)\n")}},
			want:  []string{"#names-2"},
		},
		{
			name: "links: an image that is gone", check: brokenLinks,
			files: fstest.MapFS{"docs/ops.md": {Data: []byte("![page](docs/status-page.png)\n")}},
			want:  []string{"docs/ops.md:1: docs/status-page.png: no such file"},
		},
		{
			name: "citations: sound", check: brokenCitations,
			files: fstest.MapFS{
				"docs/agents.md": {Data: []byte(page)},
				"a/a.go":         {Data: []byte("package a\n\n// See docs/agents.md#names and docs/agents.md.\nconst s = \"docs/agents.md#over-http\"\n")},
			},
		},
		{
			name: "citations: a missing page and anchors", check: brokenCitations,
			files: fstest.MapFS{
				"docs/agents.md": {Data: []byte(page)},
				"a/a.go":         {Data: []byte("package a\n\n// See docs/policy.md.\nconst s = \"docs/agents.md#approval\"\n\n// docs/agents.md#not-a-heading\n")},
				"docs/skip.go":   {Data: []byte("package docs\n\n// docs/gone.md\n")},
			},
			want: []string{"a/a.go:3: docs/policy.md: no such file", "a/a.go:4: docs/agents.md#approval: docs/agents.md has no heading", "a/a.go:6:"},
		},
		{
			name: "spec: clean", check: specCitations,
			files: fstest.MapFS{"a/a.go": {Data: []byte("// See MCP 2025-11-25, basic/transports (RFC 6750 §3).\n")}},
		},
		{
			name: "spec: in Go and in Markdown", check: specCitations,
			files: fstest.MapFS{
				"a/a.go":       {Data: []byte("package a\n\n// waits (" + specMarker + "3).\n")},
				"docs/x.md":    {Data: []byte("as " + specMarker + "12.1 says\n")},
				"a/x.txt":      {Data: []byte(specMarker + "1\n")},
				"a/testdata/t": {Data: []byte(specMarker + "1\n")},
			},
			want: []string{"a/a.go:3:", "docs/x.md:1:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad, err := tt.check(tt.files)
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) != len(tt.want) {
				t.Fatalf("problems %q, want %d matching %q", bad, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(bad[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, bad[i], w)
				}
			}
		})
	}
}

// TestReadmeLength: the bound holds at 300 lines and refuses 301.
func TestReadmeLength(t *testing.T) {
	for _, tt := range []struct {
		lines int
		ok    bool
	}{{maxReadmeLines, true}, {maxReadmeLines + 1, false}} {
		fsys := fstest.MapFS{"README.md": {Data: []byte(strings.Repeat("line\n", tt.lines))}}
		n, err := readmeLines(fsys)
		if err != nil {
			t.Fatal(err)
		}
		if (n <= maxReadmeLines) != tt.ok {
			t.Errorf("%d lines: counted %d, within the bound = %v, want %v", tt.lines, n, n <= maxReadmeLines, tt.ok)
		}
	}
}
