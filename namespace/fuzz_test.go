package namespace

import (
	"strings"
	"testing"
	"unicode"
)

// decodeInputs turns fuzz bytes into inputs: records split by 0x1e, fields
// by 0x1f; field 0 is the server, field 1 the prefix, the rest names. A
// name "n\x1dr" is n renamed to r (Input.Renames), and a name that begins
// with 0x1c is hidden (Input.Hidden).
func decodeInputs(raw string) []Input {
	var in []Input
	for rec := range strings.SplitSeq(raw, "\x1e") {
		f := strings.Split(rec, "\x1f")
		it := Input{Server: f[0]}
		if len(f) > 1 {
			it.Prefix = f[1]
		}
		for _, n := range f[min(len(f), 2):] {
			hide := false
			if rest, ok := strings.CutPrefix(n, "\x1c"); ok {
				hide, n = true, rest
			}
			if name, rename, ok := strings.Cut(n, "\x1d"); ok {
				if it.Renames == nil {
					it.Renames = map[string]string{}
				}
				it.Renames[name], n = rename, name
			}
			if hide {
				if it.Hidden == nil {
					it.Hidden = map[string]bool{}
				}
				it.Hidden[n] = true
			}
			it.Names = append(it.Names, n)
		}
		in = append(in, it)
	}
	return in
}

func FuzzBuild(f *testing.F) {
	f.Add(false, "a\x1f\x1ft\x1fu\x1eb\x1f\x1ft")
	f.Add(true, "a_b\x1fa_b\x1fc\x1ea\x1fa\x1fb_c")
	f.Add(false, "s\x1fs\x1fx y\x1fx(y\x1fx_y_2f5b5c")
	f.Add(true, "s\x1f\x1f\x1f\x1f-\x1f.\x1ft\x1fmcp_s_")
	f.Add(false, "a\x1f\x1ft\x1eb\x1f\x1ft\x1ec\x1f\x1fa__t")
	f.Add(false, strings.Repeat("z", 40)+"\x1f\x1f"+strings.Repeat("é", 70))
	f.Add(true, "\x00\x1f\xff\x1f\u202e")
	f.Add(false, "a\x1fa\x1fsearch\x1dweb\x1fx\x1eb\x1f\x1fweb\x1fa__x")
	f.Add(true, "a\x1fa\x1fs\x1dmcp_b_t\x1eb\x1fb\x1ft\x1fu\x1dmcp_b_t")
	f.Add(false, "a\x1f\x1fecho\x1eb\x1f\x1f\x1cecho\x1ec\x1f\x1f\x1cecho")
	f.Add(false, "a\x1f\x1f\x1cb__t\x1eb\x1fb\x1ft")
	f.Fuzz(func(t *testing.T, hermes bool, raw string) {
		style := StyleZeroclaw
		if hermes {
			style = StyleHermes
		}
		in := decodeInputs(raw)
		tbl, warns := Build(style, in)

		want := make(map[Route]bool)
		for _, it := range in {
			for _, n := range it.Names {
				want[Route{it.Server, n}] = true
			}
		}
		if tbl.Len() != len(want) {
			t.Fatalf("Len = %d, want %d distinct (server, name) pairs", tbl.Len(), len(want))
		}
		routes := tbl.Routes()
		for i, e := range routes {
			if !ValidName(e.Exposed) || !nameRE.MatchString(e.Exposed) {
				t.Fatalf("invalid exposed name %q", e.Exposed)
			}
			if i > 0 && routes[i-1].Exposed >= e.Exposed {
				t.Fatalf("exposed names not unique and sorted: %q, %q", routes[i-1].Exposed, e.Exposed)
			}
			if !want[e.Route] {
				t.Fatalf("route %q not in the input", e.Route)
			}
		}
		for r := range want {
			n, ok := tbl.Exposed(r.Server, r.Name)
			if !ok {
				t.Fatalf("Exposed(%q, %q) missing", r.Server, r.Name)
			}
			if got, ok := tbl.Lookup(n); !ok || got != r {
				t.Fatalf("Lookup(%q) = %q, %v; want %q", n, got, ok, r)
			}
		}
		for _, w := range warns {
			for _, c := range w {
				if c == unicode.ReplacementChar || !unicode.IsGraphic(c) && c != ' ' {
					t.Fatalf("warning holds a non-graphic character %U: %q", c, w)
				}
			}
		}
		// Same result with the inputs in reverse order.
		rev := make([]Input, len(in))
		for i, it := range in {
			names := make([]string, len(it.Names))
			for j, n := range it.Names {
				names[len(names)-1-j] = n
			}
			rev[len(in)-1-i] = Input{Server: it.Server, Prefix: it.Prefix, Names: names, Renames: it.Renames, Hidden: it.Hidden}
		}
		tbl2, warns2 := Build(style, rev)
		routes2 := tbl2.Routes()
		if len(routes2) != len(routes) {
			t.Fatalf("reversed input: %d routes, want %d", len(routes2), len(routes))
		}
		for i := range routes {
			if routes[i] != routes2[i] {
				t.Fatalf("reversed input: route %d is %q, want %q", i, routes2[i], routes[i])
			}
		}
		if strings.Join(warns, "\n") != strings.Join(warns2, "\n") {
			t.Fatalf("reversed input: warnings differ")
		}
		// Rebuilt over the table of the first half of the inputs, every
		// name of that table whose base is unchanged is kept, and the
		// result is still a valid table of the whole input.
		half, _ := Build(style, in[:len(in)/2])
		tbl3, _ := Rebuild(style, in, half)
		if tbl3.Len() != len(want) {
			t.Fatalf("rebuild: Len = %d, want %d", tbl3.Len(), len(want))
		}
		seen := map[string]bool{}
		for _, e := range tbl3.Routes() {
			if !ValidName(e.Exposed) || seen[e.Exposed] || !want[e.Route] {
				t.Fatalf("rebuild: bad entry %q", e)
			}
			seen[e.Exposed] = true
			if b := entryOf(tbl3, e.Exposed).Base; b != e.Base || b == "" {
				t.Fatalf("rebuild: Base(%q) = %q, entry says %q", e.Exposed, b, e.Base)
			}
		}
		// A server given with several prefixes uses the smallest, which may
		// differ between the half and the whole: its names may change.
		prefix := func(inputs []Input) map[string]string {
			m := map[string]string{}
			for _, it := range inputs {
				if p, ok := m[it.Server]; !ok || it.Prefix < p {
					m[it.Server] = it.Prefix
				}
			}
			return m
		}
		hp, wp := prefix(in[:len(in)/2]), prefix(in)
		reserved := map[string]bool{} // the names renames took: they go first
		for _, e := range tbl3.Routes() {
			if e.Default != "" {
				reserved[e.Base] = true
			}
		}
		for _, e := range half.Routes() {
			n, _ := tbl3.Exposed(e.Server, e.Name)
			if hp[e.Server] != wp[e.Server] || entryOf(tbl3, n).Base != e.Base || reserved[e.Exposed] || reserved[e.Base] {
				continue // renamed by its prefix, its bare fallback or a reserved name, not by a suffix
			}
			if n != e.Exposed {
				t.Fatalf("rebuild renamed %q from %q to %q", e.Route, e.Exposed, n)
			}
		}
	})
}

// validServer is the config's rule for server names: 1-32 of
// [A-Za-z0-9_-], no "__".
func validServer(s string) bool {
	return len(s) >= 1 && len(s) <= 32 && ValidName(s) && !strings.Contains(s, "__")
}

func FuzzURI(f *testing.F) {
	f.Add("filesystem", "other", "file:///srv/notes.txt")
	f.Add("a", "a_", "_x")
	f.Add("My_Srv", "my-api", "git+ssh://h__x")
	f.Add("x-", "X", "+__+")
	f.Fuzz(func(t *testing.T, server, other, uri string) {
		// Arbitrary strings never panic.
		if s, o, ok := ParseURI(uri, []string{server, other}); ok {
			if WrapSeedURI(s, o) != uri && asciiLower(WrapURI(s, o)) != asciiLower(uri) {
				t.Fatalf("ParseURI(%q) = %q, %q, which does not wrap back", uri, s, o)
			}
		}
		if !validServer(server) {
			return
		}
		servers := []string{server}
		if validServer(other) && !strings.EqualFold(other, server) && URIPrefix(other) != URIPrefix(server) {
			servers = append(servers, other)
		}
		if s, o, ok := ParseURI(WrapURI(server, uri), servers); !ok || s != server || o != uri {
			t.Fatalf("native: ParseURI(WrapURI(%q, %q)) = %q, %q, %v", server, uri, s, o, ok)
		}
		w := WrapSeedURI(server, uri)
		s, o, ok := ParseURI(w, servers)
		if len(servers) == 2 && other == server+"_" && strings.HasPrefix(uri, "_") {
			// The documented ambiguity: the longer server name wins.
			if !ok || s != other || o != uri[1:] {
				t.Fatalf("seed: ParseURI(%q) = %q, %q, %v; want %q, %q", w, s, o, ok, other, uri[1:])
			}
			return
		}
		if !ok || s != server || o != uri {
			t.Fatalf("seed: ParseURI(%q) = %q, %q, %v; want %q, %q", w, s, o, ok, server, uri)
		}
	})
}
