package filter

import "testing"

func TestServerTool(t *testing.T) {
	cases := []struct {
		name             string
		include, exclude []string
		tool             string
		want             bool
	}{
		{"no lists", nil, nil, "write_file", true},
		{"include exact", []string{"read_file"}, nil, "read_file", true},
		{"include misses", []string{"read_file"}, nil, "write_file", false},
		{"include glob", []string{"read_*"}, nil, "read_text_file", true},
		{"exclude glob", nil, []string{"write_*", "move_file"}, "write_file", false},
		{"exclude other", nil, []string{"write_*"}, "read_file", true},
		{"include wins over exclude", []string{"write_file"}, []string{"write_*"}, "write_file", true},
		{"include set, exclude ignored for non-included", []string{"read_*"}, []string{"x"}, "x", false},
		// Tool names are not paths: '*' runs across '/' (issue 12, item 13),
		// and the other path.Match metacharacters are plain characters.
		{"include star crosses a slash", []string{"delete*"}, nil, "delete/all", true},
		{"exclude star crosses a slash", nil, []string{"delete*"}, "delete/all", false},
		{"exclude inner star crosses slashes", nil, []string{"fs/*/rm"}, "fs/a/b/rm", false},
		{"question mark is literal", nil, []string{"rm?"}, "rmx", true},
		{"brackets are literal", []string{"[a]"}, nil, "[a]", true},
		{"brackets match no class", []string{"[a]"}, nil, "a", false},
		{"two stars", nil, []string{"*delete*"}, "bulk_delete_all", false},
	}
	for _, c := range cases {
		if got := ServerTool(c.include, c.exclude, c.tool); got != c.want {
			t.Errorf("%s: ServerTool(%v, %v, %q) = %v, want %v", c.name, c.include, c.exclude, c.tool, got, c.want)
		}
	}
}
