package namespace

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// hash6 is the spec's suffix, computed here independently of the package.
func hash6(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])[:6]
}

// checkTable asserts the invariants every table must hold.
func checkTable(t *testing.T, tbl *Table) {
	t.Helper()
	routes := tbl.Routes()
	if len(routes) != tbl.Len() {
		t.Fatalf("Routes has %d entries, Len is %d", len(routes), tbl.Len())
	}
	for i, e := range routes {
		if !nameRE.MatchString(e.Exposed) {
			t.Errorf("exposed name %q is not valid", e.Exposed)
		}
		if i > 0 && routes[i-1].Exposed >= e.Exposed {
			t.Errorf("routes not strictly sorted: %q then %q", routes[i-1].Exposed, e.Exposed)
		}
		if r, ok := tbl.Lookup(e.Exposed); !ok || r != e.Route {
			t.Errorf("Lookup(%q) = %v, %v; want %v", e.Exposed, r, ok, e.Route)
		}
		if n, ok := tbl.Exposed(e.Server, e.Name); !ok || n != e.Exposed {
			t.Errorf("Exposed(%q, %q) = %q, %v; want %q", e.Server, e.Name, n, ok, e.Exposed)
		}
	}
}

func TestBuild(t *testing.T) {
	long := strings.Repeat("a", 70)
	hermesLong := strings.Repeat("x.", 40)
	tests := []struct {
		name   string
		style  Style
		inputs []Input
		want   map[Route]string
		warns  []string
	}{
		{
			name:  "zeroclaw server prefix",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "filesystem", Prefix: "filesystem", Names: []string{"read_file", "write_file"}},
				{Server: "github", Prefix: "github", Names: []string{"list-issues"}},
			},
			want: map[Route]string{
				{"filesystem", "read_file"}:  "filesystem__read_file",
				{"filesystem", "write_file"}: "filesystem__write_file",
				{"github", "list-issues"}:    "github__list-issues",
			},
		},
		{
			name:  "empty style is zeroclaw",
			style: "",
			inputs: []Input{
				{Server: "fs", Prefix: "fs", Names: []string{"read"}},
			},
			want: map[Route]string{{"fs", "read"}: "fs__read"},
		},
		{
			name:  "unknown style is zeroclaw with a warning",
			style: "camel",
			inputs: []Input{
				{Server: "fs", Prefix: "fs", Names: []string{"read"}},
			},
			want:  map[Route]string{{"fs", "read"}: "fs__read"},
			warns: []string{"unknown naming style; using zeroclaw"},
		},
		{
			name:  "hermes seed examples",
			style: StyleHermes,
			inputs: []Input{
				{Server: "filesystem", Prefix: "filesystem", Names: []string{"read_file"}},
				{Server: "github", Prefix: "github", Names: []string{"list-issues"}},
				{Server: "my-api", Prefix: "my-api", Names: []string{"fetch.data"}},
			},
			want: map[Route]string{
				{"filesystem", "read_file"}: "mcp_filesystem_read_file",
				{"github", "list-issues"}:   "mcp_github_list_issues",
				{"my-api", "fetch.data"}:    "mcp_my_api_fetch_data",
			},
		},
		{
			name:  "prefix override zeroclaw",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "github", Prefix: "gh", Names: []string{"list_issues"}},
			},
			want: map[Route]string{{"github", "list_issues"}: "gh__list_issues"},
		},
		{
			name:  "prefix override hermes",
			style: StyleHermes,
			inputs: []Input{
				{Server: "github", Prefix: "g-h", Names: []string{"list.issues"}},
			},
			want: map[Route]string{{"github", "list.issues"}: "mcp_g_h_list_issues"},
		},
		{
			name:  "bare names zeroclaw",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "fs", Prefix: "", Names: []string{"read_file", "list-dir"}},
				{Server: "github", Prefix: "github", Names: []string{"read_file"}},
			},
			want: map[Route]string{
				{"fs", "read_file"}:     "read_file",
				{"fs", "list-dir"}:      "list-dir",
				{"github", "read_file"}: "github__read_file",
			},
		},
		{
			name:  "bare names hermes get dash and dot replaced",
			style: StyleHermes,
			inputs: []Input{
				{Server: "fs", Prefix: "", Names: []string{"fetch.data", "list-dir", "plain"}},
			},
			want: map[Route]string{
				{"fs", "fetch.data"}: "fetch_data",
				{"fs", "list-dir"}:   "list_dir",
				{"fs", "plain"}:      "plain",
			},
		},
		{
			name:  "two bare colliders both fall back",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "brave", Prefix: "", Names: []string{"search", "news"}},
				{Server: "exa", Prefix: "", Names: []string{"search"}},
			},
			want: map[Route]string{
				{"brave", "search"}: "brave__search",
				{"brave", "news"}:   "news",
				{"exa", "search"}:   "exa__search",
			},
			warns: []string{
				`server "brave", name "search": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "brave__search"`,
				`server "exa", name "search": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "exa__search"`,
			},
		},
		{
			name:  "bare falls back with the server name, not the prefix",
			style: StyleHermes,
			inputs: []Input{
				{Server: "brave-1", Prefix: "", Names: []string{"search"}},
				{Server: "exa", Prefix: "", Names: []string{"search"}},
			},
			want: map[Route]string{
				{"brave-1", "search"}: "mcp_brave_1_search",
				{"exa", "search"}:     "mcp_exa_search",
			},
			warns: []string{
				`server "brave-1", name "search": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "mcp_brave_1_search"`,
				`server "exa", name "search": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "mcp_exa_search"`,
			},
		},
		{
			name:  "bare collides with another server's prefixed name",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "github", Prefix: "gh", Names: []string{"list"}},
				{Server: "x", Prefix: "", Names: []string{"gh__list"}},
			},
			want: map[Route]string{
				{"github", "list"}: "gh__list",
				{"x", "gh__list"}:  "x__gh__list",
			},
			warns: []string{
				`server "x", name "gh__list": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "x__gh__list"`,
			},
		},
		{
			name:  "a fallback landing on a bare name moves it too",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "a", Prefix: "", Names: []string{"t"}},
				{Server: "b", Prefix: "", Names: []string{"t"}},
				{Server: "c", Prefix: "", Names: []string{"a__t"}},
			},
			want: map[Route]string{
				{"a", "t"}:    "a__t",
				{"b", "t"}:    "b__t",
				{"c", "a__t"}: "c__a__t",
			},
			warns: []string{
				`server "a", name "t": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "a__t"`,
				`server "b", name "t": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "b__t"`,
				`server "c", name "a__t": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "c__a__t"`,
			},
		},
		{
			name:  "sanitizing",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "srv", Prefix: "srv", Names: []string{"greet (structured)", "hello world", "v1.2", "café", "日本", "bad\xffbyte", "tab\there"}},
			},
			want: map[Route]string{
				{"srv", "greet (structured)"}: "srv__greet__structured_",
				{"srv", "hello world"}:        "srv__hello_world",
				{"srv", "v1.2"}:               "srv__v1_2",
				{"srv", "café"}:               "srv__caf_",
				{"srv", "日本"}:                 "srv____",
				{"srv", "bad\xffbyte"}:        "srv__bad_byte",
				{"srv", "tab\there"}:          "srv__tab_here",
			},
		},
		{
			name:  "prefix is sanitized too",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "srv", Prefix: "my api", Names: []string{"x"}},
			},
			want: map[Route]string{{"srv", "x"}: "my_api__x"},
		},
		{
			name:  "64 rule zeroclaw",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "srv", Prefix: "srv", Names: []string{long, strings.Repeat("b", 59)}},
			},
			want: map[Route]string{
				// 5 + 70 = 75 bytes: 57 kept, "_", sha256("srv__" + 70 a) cut to 6.
				{"srv", long}: "srv__" + strings.Repeat("a", 52) + "_537bc7",
				// exactly 64: kept as is.
				{"srv", strings.Repeat("b", 59)}: "srv__" + strings.Repeat("b", 59),
			},
		},
		{
			name:  "64 rule hermes hashes the sanitized full name",
			style: StyleHermes,
			inputs: []Input{
				{Server: "my-api", Prefix: "my-api", Names: []string{hermesLong}},
			},
			want: map[Route]string{
				{"my-api", hermesLong}: "mcp_my_api_" + strings.Repeat("x_", 23) + "_e167ec",
			},
		},
		{
			name:  "hash suffix on collision",
			style: StyleHermes,
			inputs: []Input{
				{Server: "github", Prefix: "github", Names: []string{"list_issues", "list-issues"}},
			},
			want: map[Route]string{
				{"github", "list-issues"}: "mcp_github_list_issues_32d505",
				{"github", "list_issues"}: "mcp_github_list_issues_5e6a57",
			},
			warns: []string{
				`server "github", name "list-issues": name shared with 1 other item(s), hash suffix added; exposed as "mcp_github_list_issues_32d505"`,
				`server "github", name "list_issues": name shared with 1 other item(s), hash suffix added; exposed as "mcp_github_list_issues_5e6a57"`,
			},
		},
		{
			name:  "hermes ambiguity between servers is resolved by suffix",
			style: StyleHermes,
			inputs: []Input{
				{Server: "a_b", Prefix: "a_b", Names: []string{"c"}},
				{Server: "a", Prefix: "a", Names: []string{"b_c"}},
			},
			want: map[Route]string{
				{"a_b", "c"}: "mcp_a_b_c_" + hash6("a_b\x00c"),
				{"a", "b_c"}: "mcp_a_b_c_" + hash6("a\x00b_c"),
			},
			warns: []string{
				`server "a", name "b_c": name shared with 1 other item(s), hash suffix added; exposed as "mcp_a_b_c_` + hash6("a\x00b_c") + `"`,
				`server "a_b", name "c": name shared with 1 other item(s), hash suffix added; exposed as "mcp_a_b_c_` + hash6("a_b\x00c") + `"`,
			},
		},
		{
			name:  "fallback then suffix",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "s", Prefix: "", Names: []string{"a b", "a(b"}},
			},
			want: map[Route]string{
				{"s", "a b"}: "s__a_b_" + hash6("s\x00a b"),
				{"s", "a(b"}: "s__a_b_" + hash6("s\x00a(b"),
			},
			warns: []string{
				`server "s", name "a b": bare name collides with another exposed name, fell back to the server-prefixed name; name shared with 1 other item(s), hash suffix added; exposed as "s__a_b_` + hash6("s\x00a b") + `"`,
				`server "s", name "a(b": bare name collides with another exposed name, fell back to the server-prefixed name; name shared with 1 other item(s), hash suffix added; exposed as "s__a_b_` + hash6("s\x00a(b") + `"`,
			},
		},
		{
			name:  "suffix of a long collided name keeps 64",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "s", Prefix: "s", Names: []string{strings.Repeat("q", 60) + " ", strings.Repeat("q", 60) + "!"}},
			},
			want: map[Route]string{
				{"s", strings.Repeat("q", 60) + " "}: "s__" + strings.Repeat("q", 54) + "_" + hash6("s\x00"+strings.Repeat("q", 60)+" "),
				{"s", strings.Repeat("q", 60) + "!"}: "s__" + strings.Repeat("q", 54) + "_" + hash6("s\x00"+strings.Repeat("q", 60)+"!"),
			},
			warns: []string{
				`server "s", name "` + strings.Repeat("q", 60) + ` ": name shared with 1 other item(s), hash suffix added; exposed as "s__` + strings.Repeat("q", 54) + "_" + hash6("s\x00"+strings.Repeat("q", 60)+" ") + `"`,
				`server "s", name "` + strings.Repeat("q", 60) + `!": name shared with 1 other item(s), hash suffix added; exposed as "s__` + strings.Repeat("q", 54) + "_" + hash6("s\x00"+strings.Repeat("q", 60)+"!") + `"`,
			},
		},
		{
			name:  "suffix already taken moves on to the next counter",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "s", Prefix: "s", Names: []string{"x y", "x(y", "x_y_" + hash6("s\x00x y")}},
			},
			want: map[Route]string{
				{"s", "x_y_" + hash6("s\x00x y")}: "s__x_y_" + hash6("s\x00x y"),
				{"s", "x y"}:                      "s__x_y_" + hash6("s\x00x y\x001"),
				{"s", "x(y"}:                      "s__x_y_" + hash6("s\x00x(y"),
			},
			warns: []string{
				`server "s", name "x y": name shared with 1 other item(s), hash suffix added; exposed as "s__x_y_` + hash6("s\x00x y\x001") + `"`,
				`server "s", name "x(y": name shared with 1 other item(s), hash suffix added; exposed as "s__x_y_` + hash6("s\x00x(y") + `"`,
			},
		},
		{
			name:  "empty names",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "p", Prefix: "p", Names: []string{""}},
				{Server: "b", Prefix: "", Names: []string{"", "x"}},
			},
			want: map[Route]string{
				{"p", ""}:  "p__",
				{"b", ""}:  "b__",
				{"b", "x"}: "x",
			},
			warns: []string{
				`server "b", name "": empty name cannot be exposed bare, fell back to the server-prefixed name; exposed as "b__"`,
			},
		},
		{
			name:  "empty names hermes",
			style: StyleHermes,
			inputs: []Input{
				{Server: "p", Prefix: "p", Names: []string{""}},
				{Server: "b", Prefix: "", Names: []string{""}},
			},
			want: map[Route]string{
				{"p", ""}: "mcp_p_",
				{"b", ""}: "mcp_b_",
			},
			warns: []string{
				`server "b", name "": empty name cannot be exposed bare, fell back to the server-prefixed name; exposed as "mcp_b_"`,
			},
		},
		{
			name:  "duplicate names are one entry",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "s", Prefix: "", Names: []string{"x", "x", "x"}},
			},
			want: map[Route]string{{"s", "x"}: "x"},
		},
		{
			name:  "a server given twice with different prefixes",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "s", Prefix: "zz", Names: []string{"x"}},
				{Server: "s", Prefix: "aa", Names: []string{"y", "x"}},
			},
			want: map[Route]string{
				{"s", "x"}: "aa__x",
				{"s", "y"}: "aa__y",
			},
			warns: []string{`server "s" is given with different prefixes; using the first in sort order`},
		},
		{
			name:  "warnings escape control characters and cut long names",
			style: StyleZeroclaw,
			inputs: []Input{
				{Server: "a", Prefix: "", Names: []string{"t\x1b[31m\u202e"}},
				{Server: "b", Prefix: "", Names: []string{"t\x1b[31m\u202e"}},
			},
			want: map[Route]string{
				{"a", "t\x1b[31m\u202e"}: "a__t__31m_",
				{"b", "t\x1b[31m\u202e"}: "b__t__31m_",
			},
			warns: []string{
				`server "a", name "t\x1b[31m\u202e": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "a__t__31m_"`,
				`server "b", name "t\x1b[31m\u202e": bare name collides with another exposed name, fell back to the server-prefixed name; exposed as "b__t__31m_"`,
			},
		},
		{
			name:   "no inputs",
			style:  StyleZeroclaw,
			inputs: nil,
			want:   map[Route]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl, warns := Build(tc.style, tc.inputs)
			checkTable(t, tbl)
			if tbl.Len() != len(tc.want) {
				t.Errorf("Len = %d, want %d; routes %v", tbl.Len(), len(tc.want), tbl.Routes())
			}
			for r, want := range tc.want {
				got, ok := tbl.Exposed(r.Server, r.Name)
				if !ok || got != want {
					t.Errorf("Exposed(%q, %q) = %q, %v; want %q", r.Server, r.Name, got, ok, want)
				}
			}
			if !slices.Equal(warns, tc.warns) {
				t.Errorf("warnings:\n got %q\nwant %q", warns, tc.warns)
			}
		})
	}
}

func TestWarningCutsLongNames(t *testing.T) {
	name := strings.Repeat("é", 5000)
	_, warns := Build(StyleZeroclaw, []Input{
		{Server: "a", Prefix: "", Names: []string{name}},
		{Server: "b", Prefix: "", Names: []string{name}},
	})
	if len(warns) != 2 {
		t.Fatalf("got %d warnings, want 2: %q", len(warns), warns)
	}
	for _, w := range warns {
		if len(w) > 600 {
			t.Errorf("warning is %d bytes long: %.200q", len(w), w)
		}
		if !strings.Contains(w, `"`+strings.Repeat("é", 100)+`"...(10000 bytes)`) {
			t.Errorf("warning does not show the cut name: %.300q", w)
		}
	}
}

func TestLookupMisses(t *testing.T) {
	tbl, _ := Build(StyleZeroclaw, []Input{{Server: "s", Prefix: "s", Names: []string{"x"}}})
	if r, ok := tbl.Lookup("s__y"); ok {
		t.Errorf("Lookup(s__y) = %v, want miss", r)
	}
	if r, ok := tbl.Lookup("x"); ok {
		t.Errorf("Lookup(x) = %v, want miss (only s__x exists)", r)
	}
	if n, ok := tbl.Exposed("s", "y"); ok {
		t.Errorf("Exposed(s, y) = %q, want miss", n)
	}
	if n, ok := tbl.Exposed("t", "x"); ok {
		t.Errorf("Exposed(t, x) = %q, want miss", n)
	}
}

func TestNilTable(t *testing.T) {
	var tbl *Table
	if _, ok := tbl.Lookup("x"); ok {
		t.Error("nil Lookup found something")
	}
	if _, ok := tbl.Exposed("s", "x"); ok {
		t.Error("nil Exposed found something")
	}
	if tbl.Len() != 0 || tbl.Routes() != nil {
		t.Error("nil table is not empty")
	}
}

func TestRoutesIsACopy(t *testing.T) {
	tbl, _ := Build(StyleZeroclaw, []Input{{Server: "s", Prefix: "s", Names: []string{"b", "a"}}})
	r := tbl.Routes()
	want := []Entry{{"s__a", "s__a", "", Route{"s", "a"}}, {"s__b", "s__b", "", Route{"s", "b"}}}
	if !slices.Equal(r, want) {
		t.Fatalf("Routes = %v, want %v", r, want)
	}
	r[0].Exposed = "changed"
	if got := tbl.Routes()[0].Exposed; got != "s__a" {
		t.Errorf("modifying the returned slice changed the table: %q", got)
	}
}

// adversarialInputs is a catalog full of collisions of every kind.
func adversarialInputs() []Input {
	var in []Input
	for s := range 12 {
		server := []string{"a", "a_b", "a-b", "b", "c_", "gh", "x", "y", "z1", "z-1", "q", "w"}[s]
		prefix := server
		if s%3 == 0 {
			prefix = ""
		}
		if s == 5 {
			prefix = "a"
		}
		names := []string{"", "t", "t.", "t-", "t ", "a__t", "b_t", "gh__t", "mcp_a_t", strings.Repeat("L", 80), strings.Repeat("L", 80) + "!", "日本", "x_y"}
		in = append(in, Input{Server: server, Prefix: prefix, Names: names})
	}
	return in
}

func TestDeterministicUnderShuffle(t *testing.T) {
	for _, style := range []Style{StyleZeroclaw, StyleHermes} {
		t.Run(string(style), func(t *testing.T) {
			base := adversarialInputs()
			want, wantWarns := Build(style, base)
			checkTable(t, want)
			if len(wantWarns) == 0 {
				t.Fatal("adversarial catalog produced no warnings")
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for round := range 30 {
				in := adversarialInputs()
				rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
				for k := range in {
					names := in[k].Names
					rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
					if round%2 == 1 {
						in[k].Names = append(names, names[0])
					}
				}
				got, warns := Build(style, in)
				if !slices.Equal(got.Routes(), want.Routes()) {
					t.Fatalf("round %d: routes differ after shuffling", round)
				}
				if !slices.Equal(warns, wantWarns) {
					t.Fatalf("round %d: warnings differ after shuffling:\n%q\n%q", round, warns, wantWarns)
				}
			}
		})
	}
}

// TestBuildLargeCollidingGroup guards against quadratic work: 20,000 bare
// names of one server that all sanitize to one name, and 20,000 of another
// server that all land on the first one's fallback name.
func TestBuildLargeCollidingGroup(t *testing.T) {
	const n = 20000
	const junk = " .()!@#$" // eight characters that all become '_'
	enc := func(i int) string {
		b := make([]byte, 5)
		for j := range b {
			b[j] = junk[i%8]
			i /= 8
		}
		return string(b)
	}
	names := make([]string, n)
	other := make([]string, n)
	for i := range names {
		names[i] = "x" + enc(i)
		other[i] = "s__x" + enc(i)
	}
	in := []Input{{Server: "s", Prefix: "", Names: names}, {Server: "t", Prefix: "", Names: other}}
	tbl, warns := Build(StyleZeroclaw, in)
	checkTable(t, tbl)
	if tbl.Len() != 2*n {
		t.Fatalf("Len = %d, want %d", tbl.Len(), 2*n)
	}
	if len(warns) != 2*n {
		t.Errorf("got %d warnings, want one per item (%d)", len(warns), 2*n)
	}
	if got, want := mustExposed(t, tbl, "s", names[0]), "s__x_____"+"_"+hash6("s\x00"+names[0]); got != want {
		t.Errorf("s: exposed as %q, want %q", got, want)
	}
	if got, want := mustExposed(t, tbl, "t", other[0]), "t__s__x_____"+"_"+hash6("t\x00"+other[0]); got != want {
		t.Errorf("t: exposed as %q, want %q", got, want)
	}
}

func mustExposed(t *testing.T, tbl *Table, server, name string) string {
	t.Helper()
	e, ok := tbl.Exposed(server, name)
	if !ok {
		t.Fatalf("Exposed(%q, %q) missing", server, name)
	}
	return e
}

// A hidden item (dropped by its server's tools.include/exclude) yields a
// bare name to the one exposed item it collides with; two exposed bare
// colliders still both fall back, the hidden one with them.
func TestHiddenYieldsBareName(t *testing.T) {
	for _, tt := range []struct {
		name   string
		inputs []Input
		want   map[Route]string
	}{
		{"one exposed", []Input{
			{Server: "a", Names: []string{"echo"}},
			{Server: "b", Names: []string{"echo"}, Hidden: map[string]bool{"echo": true}},
		}, map[Route]string{{"a", "echo"}: "echo", {"b", "echo"}: "b__echo"}},
		{"two exposed", []Input{
			{Server: "a", Names: []string{"echo"}},
			{Server: "b", Names: []string{"echo"}},
			{Server: "c", Names: []string{"echo"}, Hidden: map[string]bool{"echo": true}},
		}, map[Route]string{{"a", "echo"}: "a__echo", {"b", "echo"}: "b__echo", {"c", "echo"}: "c__echo"}},
		{"exposed prefixed", []Input{
			{Server: "a", Names: []string{"b__t"}, Hidden: map[string]bool{"b__t": true}},
			{Server: "b", Prefix: "b", Names: []string{"t"}},
		}, map[Route]string{{"a", "b__t"}: "a__b__t", {"b", "t"}: "b__t"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tbl, _ := Build(StyleZeroclaw, tt.inputs)
			for r, want := range tt.want {
				if got, _ := tbl.Exposed(r.Server, r.Name); got != want {
					t.Errorf("%s/%s exposed as %q, want %q", r.Server, r.Name, got, want)
				}
			}
		})
	}
}
