package namespace

import (
	"strings"
	"testing"
)

// TestRenames is the names of docs/agents.md#overrides-and-rate-limits: an override's name replaces the exposed
// name, is reserved (a tool whose own name equals it gets the hash suffix,
// a bare one falls back), and the table keeps the default name for policy.
func TestRenames(t *testing.T) {
	tests := []struct {
		name   string
		style  Style
		before []Input // the previous build; nil means none
		inputs []Input
		// want maps routes to exposed name, base and default.
		want map[Route][3]string
		warn string // a substring of the warnings; "" means none
	}{
		{
			name:   "a rename replaces the name; the default is kept for policy",
			style:  StyleZeroclaw,
			inputs: []Input{{Server: "brave", Prefix: "brave", Names: []string{"brave_web_search", "brave_news"}, Renames: map[string]string{"brave_web_search": "web_search"}}},
			want: map[Route][3]string{
				{"brave", "brave_web_search"}: {"web_search", "web_search", "brave__brave_web_search"},
				{"brave", "brave_news"}:       {"brave__brave_news", "brave__brave_news", ""},
			},
		},
		{
			name:  "a tool whose default name is a rename gets the suffix",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "a", Prefix: "a", Names: []string{"search"}, Renames: map[string]string{"search": "b__find"}},
				{Server: "b", Prefix: "b", Names: []string{"find"}},
			},
			want: map[Route][3]string{
				{"a", "search"}: {"b__find", "b__find", "a__search"},
				{"b", "find"}:   {"b__find_" + hash6("b\x00find"), "b__find", ""},
			},
			warn: `server "b", name "find": name is reserved by a tools.overrides name, hash suffix added; exposed as "b__find_`,
		},
		{
			name:  "a bare tool whose name is a rename falls back",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "a", Prefix: "a", Names: []string{"search"}, Renames: map[string]string{"search": "find"}},
				{Server: "b", Prefix: "", Names: []string{"find"}},
			},
			want: map[Route][3]string{
				{"a", "search"}: {"find", "find", "a__search"},
				{"b", "find"}:   {"b__find", "b__find", ""},
			},
			warn: "fell back to the server-prefixed name",
		},
		{
			name:   "a rename takes a name a tool held (a reload that adds the override)",
			style:  StyleZeroclaw,
			before: []Input{{Server: "b", Prefix: "b", Names: []string{"find"}}, {Server: "a", Prefix: "a", Names: []string{"search"}}},
			inputs: []Input{
				{Server: "b", Prefix: "b", Names: []string{"find"}},
				{Server: "a", Prefix: "a", Names: []string{"search"}, Renames: map[string]string{"search": "b__find"}},
			},
			want: map[Route][3]string{
				{"a", "search"}: {"b__find", "b__find", "a__search"},
				{"b", "find"}:   {"b__find_" + hash6("b\x00find"), "b__find", ""},
			},
			warn: "name is reserved by a tools.overrides name",
		},
		{
			name:   "dropping a rename gives the default name back",
			style:  StyleZeroclaw,
			before: []Input{{Server: "a", Prefix: "a", Names: []string{"search"}, Renames: map[string]string{"search": "find"}}},
			inputs: []Input{{Server: "a", Prefix: "a", Names: []string{"search"}}},
			want:   map[Route][3]string{{"a", "search"}: {"a__search", "a__search", ""}},
		},
		{
			name:  "two tools renamed alike both get the suffix (validation refuses it)",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "a", Prefix: "a", Names: []string{"x"}, Renames: map[string]string{"x": "same"}},
				{Server: "b", Prefix: "b", Names: []string{"y"}, Renames: map[string]string{"y": "same"}},
			},
			want: map[Route][3]string{
				{"a", "x"}: {"same_" + hash6("a\x00x"), "same", "a__x"},
				{"b", "y"}: {"same_" + hash6("b\x00y"), "same", "b__y"},
			},
			warn: "name shared with 1 other item(s)",
		},
		{
			name:   "hermes: the rename is taken as written, the default in style",
			style:  StyleHermes,
			inputs: []Input{{Server: "gh", Prefix: "gh", Names: []string{"list-issues"}, Renames: map[string]string{"list-issues": "issues-list"}}},
			want:   map[Route][3]string{{"gh", "list-issues"}: {"issues-list", "issues-list", "mcp_gh_list_issues"}},
		},
		{
			name:   "a rename that is not a valid name is sanitized",
			style:  StyleZeroclaw,
			inputs: []Input{{Server: "s", Prefix: "s", Names: []string{"t"}, Renames: map[string]string{"t": "web search"}}},
			want:   map[Route][3]string{{"s", "t"}: {"web_search", "web_search", "s__t"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var prev *Table
			if tt.before != nil {
				prev, _ = Build(tt.style, tt.before)
			}
			tbl, warns := Rebuild(tt.style, tt.inputs, prev)
			for r, want := range tt.want {
				exposed, ok := tbl.Exposed(r.Server, r.Name)
				got := [3]string{exposed, entryOf(tbl, exposed).Base, entryOf(tbl, exposed).Default}
				if !ok || got != want {
					t.Errorf("%v: (exposed, base, default) = %q, want %q", r, got, want)
				}
				if back, ok := tbl.Lookup(exposed); !ok || back != r {
					t.Errorf("Lookup(%q) = %v, want %v", exposed, back, r)
				}
			}
			all := strings.Join(warns, "\n")
			if tt.warn == "" && all != "" || !strings.Contains(all, tt.warn) {
				t.Errorf("warnings:\n%s\nwant one holding %q", all, tt.warn)
			}
			// A rebuild over itself changes nothing.
			again, _ := Rebuild(tt.style, tt.inputs, tbl)
			for r := range tt.want {
				a, _ := tbl.Exposed(r.Server, r.Name)
				b, _ := again.Exposed(r.Server, r.Name)
				if a != b {
					t.Errorf("%v: %q, then %q on a rebuild", r, a, b)
				}
			}
		})
	}
}
