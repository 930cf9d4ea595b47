package namespace

import (
	"strings"
	"testing"
)

// TestRebuildKeepsHeldNames is issue 12, item 2: a tool that holds a name
// keeps it when a colliding tool appears later; the newcomer alone gets the
// hash suffix, and its base is the name it collided on.
func TestRebuildKeepsHeldNames(t *testing.T) {
	tests := []struct {
		name   string
		style  Style
		from   Style // the style of the previous build; "" means style
		before []Input
		after  []Input
		// want maps routes to their exposed name and base after the rebuild.
		want map[Route][2]string
	}{
		{
			name:   "an upstream adds del.file next to del_file",
			style:  StyleZeroclaw,
			before: []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"del_file"}}},
			after:  []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"del_file", "del.file"}}},
			want: map[Route][2]string{
				{"fx1", "del_file"}: {"fx1__del_file", "fx1__del_file"},
				{"fx1", "del.file"}: {"fx1__del_file_" + hash6("fx1\x00del.file"), "fx1__del_file"},
			},
		},
		{
			name:   "hermes: aws_s3+delete arrives after aws+s3.delete",
			style:  StyleHermes,
			before: []Input{{Server: "aws", Prefix: "aws", Names: []string{"s3.delete"}}},
			after: []Input{
				{Server: "aws", Prefix: "aws", Names: []string{"s3.delete"}},
				{Server: "aws_s3", Prefix: "aws_s3", Names: []string{"delete"}},
			},
			want: map[Route][2]string{
				{"aws", "s3.delete"}: {"mcp_aws_s3_delete", "mcp_aws_s3_delete"},
				{"aws_s3", "delete"}: {"mcp_aws_s3_delete_" + hash6("aws_s3\x00delete"), "mcp_aws_s3_delete"},
			},
		},
		{
			name:   "bare colliders both fall back, the holder too (the fallback rule of docs/agents.md#names)",
			style:  StyleZeroclaw,
			before: []Input{{Server: "a", Prefix: "", Names: []string{"search"}}},
			after: []Input{
				{Server: "a", Prefix: "", Names: []string{"search"}},
				{Server: "b", Prefix: "", Names: []string{"search"}},
			},
			want: map[Route][2]string{
				{"a", "search"}: {"a__search", "a__search"},
				{"b", "search"}: {"b__search", "b__search"},
			},
		},
		{
			name:  "a suffixed holder keeps its suffix when its rival leaves",
			style: StyleZeroclaw,
			before: []Input{
				{Server: "fx1", Prefix: "fx1", Names: []string{"del_file", "del.file"}},
			},
			after: []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"del.file"}}},
			want: map[Route][2]string{
				{"fx1", "del.file"}: {"fx1__del_file_" + hash6("fx1\x00del.file"), "fx1__del_file"},
			},
		},
		{
			name:   "a changed prefix is a new name, not a held one",
			style:  StyleZeroclaw,
			before: []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"read"}}},
			after:  []Input{{Server: "fx1", Prefix: "files", Names: []string{"read"}}},
			want:   map[Route][2]string{{"fx1", "read"}: {"files__read", "files__read"}},
		},
		{
			name:   "a changed style is a new name, not a held one",
			style:  StyleHermes,
			from:   StyleZeroclaw,
			before: []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"read"}}},
			after:  []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"read"}}},
			want:   map[Route][2]string{{"fx1", "read"}: {"mcp_fx1_read", "mcp_fx1_read"}},
		},
		{
			name:   "newcomers that collide with each other both get the suffix",
			style:  StyleZeroclaw,
			before: []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"other"}}},
			after:  []Input{{Server: "fx1", Prefix: "fx1", Names: []string{"other", "x.y", "x_y"}}},
			want: map[Route][2]string{
				{"fx1", "other"}: {"fx1__other", "fx1__other"},
				{"fx1", "x.y"}:   {"fx1__x_y_" + hash6("fx1\x00x.y"), "fx1__x_y"},
				{"fx1", "x_y"}:   {"fx1__x_y_" + hash6("fx1\x00x_y"), "fx1__x_y"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			from := tc.from
			if from == "" {
				from = tc.style
			}
			prev, _ := Build(from, tc.before)
			tbl, warns := Rebuild(tc.style, tc.after, prev)
			checkTable(t, tbl)
			if tbl.Len() != len(tc.want) {
				t.Errorf("table has %d entries, want %d: %v", tbl.Len(), len(tc.want), tbl.Routes())
			}
			for r, w := range tc.want {
				got := mustExposed(t, tbl, r.Server, r.Name)
				if got != w[0] {
					t.Errorf("%v exposed as %q, want %q (warnings %q)", r, got, w[0], warns)
				}
				if b := entryOf(tbl, got).Base; b != w[1] {
					t.Errorf("Base(%q) = %q, want %q", got, b, w[1])
				}
			}
		})
	}
}

// TestRebuildChainKeepsNames rebuilds many times as tools come and go: a
// name once given stays with its tool while the tool is in every build,
// unless its base changes (a bare name falling back, or back, as bare
// colliders come and go); a hash suffix never renames a tool.
func TestRebuildChainKeepsNames(t *testing.T) {
	servers := []string{"a", "b", "c"}
	names := []string{"x", "x.y", "x_y", "x-y", strings.Repeat("l", 70), strings.Repeat("l", 70) + ".", "search"}
	var prev *Table
	seen := map[Route]string{}
	bases := map[Route]string{}
	for step := 0; step < 40; step++ {
		var inputs []Input
		present := map[Route]bool{}
		for si, s := range servers {
			in := Input{Server: s, Prefix: s}
			if si == 2 {
				in.Prefix = ""
			}
			for ni, n := range names {
				if (step+si*3+ni*5)%4 != 0 { // a changing subset
					in.Names = append(in.Names, n)
					present[Route{s, n}] = true
				}
			}
			inputs = append(inputs, in)
		}
		tbl, _ := Rebuild(StyleZeroclaw, inputs, prev)
		checkTable(t, tbl)
		for r := range present {
			got := mustExposed(t, tbl, r.Server, r.Name)
			if old, ok := seen[r]; ok && old != got && bases[r] == entryOf(tbl, got).Base {
				t.Fatalf("step %d: %v renamed from %q to %q, base %q unchanged", step, r, old, got, bases[r])
			}
			if old, ok := seen[r]; ok && old != got && r.Server != "c" {
				t.Fatalf("step %d: %v of a prefixed server renamed from %q to %q", step, r, old, got)
			}
			seen[r], bases[r] = got, entryOf(tbl, got).Base
		}
		for r := range seen {
			if !present[r] {
				delete(seen, r) // gone: it no longer holds its name
			}
		}
		prev = tbl
	}
}

func TestBaseOfUnknownAndNil(t *testing.T) {
	tbl, _ := Build(StyleZeroclaw, []Input{{Server: "s", Prefix: "s", Names: []string{"a"}}})
	if b := entryOf(tbl, "s__a").Base; b != "s__a" {
		t.Errorf("Base of an unsuffixed name = %q", b)
	}
	if b := entryOf(tbl, "nope").Base; b != "" {
		t.Errorf("Base of an unknown name = %q", b)
	}
	var nilTable *Table
	if b := entryOf(nilTable, "s__a").Base; b != "" {
		t.Errorf("nil table Base = %q", b)
	}
}
