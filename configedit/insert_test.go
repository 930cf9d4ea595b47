package configedit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// entry is a servers entry of two fields, rendered like the registry's.
type entry struct{}

func (entry) Block(in, step string) []string {
	return []string{in + "weather:", in + step + `command: "npx"`, in + step + `args: ["-y", "weather@1.0.0"]`}
}

func (entry) Flow() string { return `weather: {command: "npx", args: ["-y", "weather@1.0.0"]}` }

// onlyAdded reports whether after is before with lines inserted: every
// line of before is in after, in order, unchanged.
func onlyAdded(before, after string) bool {
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	j := 0
	for _, l := range a {
		if j < len(b) && l == b[j] {
			j++
		}
	}
	return j == len(b)
}

// servers decodes the servers map of a config text.
func servers(t *testing.T, text string) map[string]any {
	t.Helper()
	var doc struct {
		Servers map[string]any `yaml:"servers"`
	}
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("result is not YAML: %v\n%s", err, text)
	}
	return doc.Servers
}

func TestAddServer(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		changed        bool
	}{
		{
			name: "block, blank lines between servers, comments after",
			in: `# top
servers:
  # first
  a:
    command: a

  b:
    command: b   # trailing
    # inside b

# about log
log:
  level: info
`,
			want: `# top
servers:
  # first
  a:
    command: a

  b:
    command: b   # trailing
    # inside b

  weather:
    command: "npx"
    args: ["-y", "weather@1.0.0"]

# about log
log:
  level: info
`,
		},
		{
			name: "four-space indentation, servers last, no blank lines",
			in: `listen:
    path: /mcp
servers:
    a:
        command: a
    b:
        url: https://b.example/mcp
`,
			want: `listen:
    path: /mcp
servers:
    a:
        command: a
    b:
        url: https://b.example/mcp
    weather:
        command: "npx"
        args: ["-y", "weather@1.0.0"]
`,
		},
		{
			name: "empty servers key with a comment",
			in: `servers:   # none yet
log: {level: debug}
`,
			want: `servers:   # none yet
  weather:
    command: "npx"
    args: ["-y", "weather@1.0.0"]
log: {level: debug}
`,
		},
		{
			name: "no servers key",
			in: `listen:
   path: /mcp
`,
			want: `listen:
   path: /mcp
servers:
   weather:
      command: "npx"
      args: ["-y", "weather@1.0.0"]
`,
		},
		{
			name: "empty file",
			in:   ``,
			want: `servers:
  weather:
    command: "npx"
    args: ["-y", "weather@1.0.0"]
`,
		},
		{
			name: "multi-line flow mapping",
			in: `servers: {
  a: {command: a},
  b: {command: b}
}
`,
			want: `servers: {
  weather: {command: "npx", args: ["-y", "weather@1.0.0"]},
  a: {command: a},
  b: {command: b}
}
`,
		},
		{
			name:    "one-line empty flow mapping",
			in:      "servers: {}  # fill me\n",
			want:    "servers: {weather: {command: \"npx\", args: [\"-y\", \"weather@1.0.0\"]}}  # fill me\n",
			changed: true,
		},
		{
			name:    "one-line flow mapping with a server",
			in:      "servers: {a: {command: \"a}\", args: ['x''}']}}\n",
			want:    "servers: {a: {command: \"a}\", args: ['x''}']}, weather: {command: \"npx\", args: [\"-y\", \"weather@1.0.0\"]}}\n",
			changed: true,
		},
		{
			name: "CRLF line ends",
			in:   "servers:\r\n  a:\r\n    command: a\r\n",
			want: "servers:\r\n  a:\r\n    command: a\r\n  weather:\r\n    command: \"npx\"\r\n    args: [\"-y\", \"weather@1.0.0\"]\r\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := AddServer([]byte(tc.in), entry{})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tc.want)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			if !tc.changed && !onlyAdded(tc.in, string(out)) {
				t.Errorf("a line of the file was changed or removed")
			}
			got := servers(t, string(out))
			if _, ok := got["weather"]; !ok {
				t.Errorf("servers has no weather entry: %v", got)
			}
			if before := servers(t, tc.in); len(got) != len(before)+1 {
				t.Errorf("servers went from %d to %d entries", len(before), len(got))
			}
		})
	}
}

// TestAddServerExample: the bundled example config gets the entry after
// its last server, before the comment that introduces blobs, and nothing
// else changes.
func TestAddServerExample(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := AddServer(in, entry{})
	if err != nil || changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	if !onlyAdded(string(in), string(out)) {
		t.Fatalf("a line was changed")
	}
	want := `    limits: {max_concurrent: 2}

  weather:
    command: "npx"
    args: ["-y", "weather@1.0.0"]

# Embedded binary blobs`
	if !strings.Contains(string(out), want) {
		t.Errorf("entry not after the last server:\n%s", out)
	}
	if n := strings.Count(string(out), "\n") - strings.Count(string(in), "\n"); n != 4 {
		t.Errorf("%d lines added, want 4 (a blank line and the entry)", n)
	}
}

// TestAddServerRefuses: layouts that cannot take an inserted entry are
// ErrLayout, with the reason.
func TestAddServerRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"servers": {"a": {"command": "a"}}}`, "the top level is not a block mapping (a JSON or flow-style file)"},
		{"servers: {a: {command: a},\n  b: {command: b}}\n", "servers (line 1) is a flow mapping over several lines with pairs on its first line"},
		{"servers: [a]\n", "servers (line 1) is not a mapping"},
	} {
		_, _, err := AddServer([]byte(tc.in), entry{})
		if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want ErrLayout with %q", tc.in, err, tc.want)
		}
	}
}
