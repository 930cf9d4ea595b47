package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/import")

func TestImportJSONGolden(t *testing.T) {
	for _, host := range []string{"claude", "cursor", "vscode"} {
		t.Run(host, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "import", host+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ImportJSON(in)
			if err != nil {
				t.Fatalf("ImportJSON: %v", err)
			}
			golden := filepath.Join("testdata", "import", host+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, got)
			}
			if _, err := Parse(got, importCheckEnv); err != nil {
				t.Errorf("output does not parse back: %v", err)
			}
		})
	}
}

func TestImportJSONValues(t *testing.T) {
	in, err := os.ReadFile("testdata/import/claude.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := ImportJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(out, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	notes := cfg.Servers["My-Notes"]
	checks := []struct{ name, got, want string }{
		{"secret copied verbatim", cfg.Servers["github"].Env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_exampleexampleexample0000"},
		{"literal text survives", notes.Env["LITERAL"], "cost: $${price}"},
		{"variable stays a reference", notes.Env["NOTES_DIR"], "/home/test/notes"},
		{"number argument", notes.Args[1], "8080"},
		{"renamed", cfg.Servers["my_db"].Command, "uvx"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if notes.IsEnabled() {
		t.Error(`"disabled": true was not imported as enabled: false`)
	}
}

func TestImportJSONErrors(t *testing.T) {
	tests := map[string]string{
		"not json":          "cannot import: not a JSON object: invalid character 'o' in literal null (expecting 'u')",
		`[1, 2]`:            "cannot import: not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage",
		`null`:              "cannot import: not a JSON object",
		`{"other": {}}`:     `cannot import: no "mcpServers" or "servers" object found`,
		`{"mcpServers": 1}`: `cannot import: "mcpServers" is not an object`,
	}
	for in, want := range tests {
		_, err := ImportJSON([]byte(in))
		if err == nil || err.Error() != want || !errors.Is(err, ErrImport) {
			t.Errorf("ImportJSON(%s) = %v, want %q", in, err, want)
		}
	}
	if _, err := ImportJSON(make([]byte, maxImportBytes+1)); err == nil || !errors.Is(err, ErrImport) {
		t.Errorf("oversized input: %v", err)
	}
}

// TestImportJSONDeepNesting: a file nested as deep as its size allows is
// refused with an error, not a crash of the process (the reason
// stripJSONC is not a recursive parser), and comments on its last line,
// with or without a final newline, are no error.
func TestImportJSONDeepNesting(t *testing.T) {
	for _, open := range []string{"[", `{"a":`} {
		deep := bytes.Repeat([]byte(open), maxImportBytes/len(open))
		_, err := ImportJSON(deep)
		if want := "exceeded max depth"; err == nil || !errors.Is(err, ErrImport) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%d bytes of %q: %v, want an import error ending %q", len(deep), open, err, want)
		}
	}
	for _, tail := range []string{"// last", "// last\n", "/* last */"} {
		if _, err := ImportJSON([]byte(`{"servers": {"a": {"command": "x"}}}` + tail)); err != nil {
			t.Errorf("a file ending in %q: %v", tail, err)
		}
	}
}

func TestImportJSONEntries(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // lines the output must contain
	}{
		{"vscode settings", `{"mcp": {"servers": {"a": {"command": "x"}}}}`, []string{"from VS Code settings (mcp.servers)", "  a:\n    command: \"x\""}},
		{"windsurf serverUrl", `{"mcpServers": {"w": {"serverUrl": "https://w.example.com/mcp"}}}`, []string{`    url: "https://w.example.com/mcp"`}},
		{"streamable type", `{"servers": {"s": {"type": "streamableHttp", "url": "https://s.example.com"}}}`, []string{"  s:\n    url:"}},
		{"all skipped", `{"mcpServers": {"x": 5}}`, []string{`# skipped server "x": the entry is not a JSON object`, "servers: {}"}},
		{"bad args", `{"mcpServers": {"x": {"command": "c", "args": [{}]}}}`, []string{`# skipped server "x": "args" is not a list of strings`}},
		{"bad env", `{"mcpServers": {"x": {"command": "c", "env": {"A": [1]}}}}`, []string{`# skipped server "x": "env" is not an object of strings`}},
		{"both", `{"mcpServers": {"x": {"command": "c", "url": "https://x"}}}`, []string{`# skipped server "x": it has both command and url`}},
		{"type with command", `{"servers": {"x": {"type": "sse", "command": "c"}}}`, []string{`# skipped server "x": type "sse" needs a url, not a command`}},
		{"invalid env name", `{"mcpServers": {"x": {"command": "c", "env": {"A=B": "1"}}}}`, []string{`# skipped server "x": servers.x.env: invalid variable name "A=B"`}},
		{"odd key quoted", `{"mcpServers": {"x": {"command": "c", "env": {"true": "1", "a b": "\u0085\n\"q\""}}}}`, []string{`      "a b": "\u0085\n\"q\""`, `      "true": "1"`}},
		{"empty name", `{"mcpServers": {"": {"command": "c"}}}`, []string{`# imported from "":`, "  server:\n"}},
		{"host variables", `{"servers": {"x": {"command": "c", "args": ["${workspaceFolder}", "${input:k}", "${A}", "$${B}", "${"]}}}`,
			[]string{`      - "$${workspaceFolder}"`, `      - "$${input:k}"`, `      - "${A}"`, `      - "$$${B}"`, `      - "$${"`, `# args[0]: ${workspaceFolder} is kept as literal text`}},
		{"comment is one line", `{"mcpServers": {"x": {"command": "c", "note": "a\nb\u2028c"}}}`, []string{`# not imported: "note": "a\nb\u2028c"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ImportJSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if _, err := Parse(out, importCheckEnv); err != nil {
				t.Errorf("output does not parse back: %v\n%s", err, out)
			}
		})
	}
}

func TestServerName(t *testing.T) {
	tests := map[string]string{
		"github":    "github",
		"My Server": "My-Server",
		"a__b___c":  "a_b_c",
		"ünï.cödé":  "-n--c-d-",
		"":          "server",
		"x/y:z":     "x-y-z",
		"0123456789012345678901234567890123456789": "01234567890123456789012345678901",
	}
	for in, want := range tests {
		if got := ServerName(in); got != want {
			t.Errorf("ServerName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStripJSONC(t *testing.T) {
	tests := map[string]string{
		`{"a": 1} // c`:            `{"a": 1}  `,
		"{\"a\": 1, // c\n}":       "{\"a\": 1  \n}",
		`{"a": "//not", "b": 2,}`:  `{"a": "//not", "b": 2}`,
		`{"a": /* x */ [1, 2, ],}`: `{"a":   [1, 2 ]}`,
		`{"a": "\"/*", "b": 1}`:    `{"a": "\"/*", "b": 1}`,
		`{"a": 1} /* open`:         `{"a": 1}  `,
	}
	for in, want := range tests {
		if got := string(stripJSONC([]byte(in))); got != want {
			t.Errorf("stripJSONC(%q) = %q, want %q", in, got, want)
		}
	}
}
