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
		{"star does not cross a slash", []string{"a*"}, nil, "a/b", false},
		{"bad pattern matches nothing", []string{"[a"}, nil, "a", false},
	}
	for _, c := range cases {
		if got := ServerTool(c.include, c.exclude, c.tool); got != c.want {
			t.Errorf("%s: ServerTool(%v, %v, %q) = %v, want %v", c.name, c.include, c.exclude, c.tool, got, c.want)
		}
	}
}
