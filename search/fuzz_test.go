package search

import (
	"math"
	"strings"
	"testing"
)

// FuzzSearch indexes three arbitrary documents and runs an arbitrary query:
// no panic, every hit is one of the documents, at most max hits, positive
// finite scores, sorted by score then name.
func FuzzSearch(f *testing.F) {
	f.Add("github__create_issue", "Open an issue", `{"properties":{"title":{"type":"string"}}}`,
		"fs__read_file", "Read a file", `{"type":"object"}`, "mcp_x_y", "", `[`, "open issue", 5)
	f.Add("a", "the of", `{"properties":{"p":{"properties":{"q":{"items":{"properties":{"r":{}}}}}}}}`,
		"A__B__C", "select:x", `{"properties":{"x":{"enum":["a","b",1]}}}`, "", "\xff\xfe", `null`, "read_file GitHub__Create", 2)
	f.Add("x", "ÄÖÜ größe", `{}`, "y", "日本語 テキスト", `{}`, "z", "k8s repo PRs", `{}`, "größe repos pr", 1)
	f.Fuzz(func(t *testing.T, n1, d1, s1, n2, d2, s2, n3, d3, s3, query string, max int) {
		docs := []Doc{
			{Name: n1, Description: d1, Schema: []byte(s1)},
			{Name: n2, Description: d2, Schema: []byte(s2)},
			{Name: n3, Server: n1, Description: d3, Schema: []byte(s3)},
		}
		max %= 10
		ix := Build(docs)
		hits := ix.Search(query, max)
		if max <= 0 && hits != nil {
			t.Fatalf("max %d: %d hits", max, len(hits))
		}
		if len(hits) > max && max > 0 {
			t.Fatalf("max %d: %d hits", max, len(hits))
		}
		seen := map[*Doc]bool{}
		for i, h := range hits {
			if seen[h.Doc] {
				t.Fatalf("document %q returned twice", h.Doc.Name)
			}
			seen[h.Doc] = true
			found := false
			for _, d := range docs {
				if d.Name == h.Doc.Name && d.Description == h.Doc.Description && string(d.Schema) == string(h.Doc.Schema) {
					found = true
				}
			}
			if !found {
				t.Fatalf("hit %d %q is not one of the documents", i, h.Doc.Name)
			}
			if !(h.Score > 0) || math.IsInf(h.Score, 0) {
				t.Fatalf("hit %d score %v", i, h.Score)
			}
		}
		checkSorted(t, hits)
		seed := SearchSeed(docs, query, max)
		if max > 0 && len(seed) > max || max <= 0 && seed != nil {
			t.Fatalf("seed: max %d, %d hits", max, len(seed))
		}
		for _, h := range seed {
			if h.Doc != &docs[0] && h.Doc != &docs[1] && h.Doc != &docs[2] {
				t.Fatalf("seed hit %q does not point into docs", h.Doc.Name)
			}
			if query != "" && strings.TrimSpace(query) != "" && h.Score != float64(SeedScore(query, h.Doc)) {
				t.Fatalf("seed hit %q: score %v, SeedScore %d", h.Doc.Name, h.Score, SeedScore(query, h.Doc))
			}
		}
	})
}

// FuzzParseSelect: names are non-empty, trimmed, free of commas and unique;
// ok exactly when the trimmed query starts with "select:" in any case.
func FuzzParseSelect(f *testing.F) {
	for _, s := range []string{"select:a,b", " select: a ,, b ", "SELECT:", "select a", "", "select:\xff,\u00a0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		names, ok := ParseSelect(q)
		trimmed := strings.TrimSpace(q)
		wantOK := len(trimmed) >= len(selectPrefix) && strings.EqualFold(trimmed[:len(selectPrefix)], selectPrefix)
		if ok != wantOK {
			t.Fatalf("ParseSelect(%q) ok = %v", q, ok)
		}
		if !ok && names != nil {
			t.Fatalf("not a select, names %q", names)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || n != strings.TrimSpace(n) || strings.Contains(n, ",") || seen[n] {
				t.Fatalf("ParseSelect(%q): bad name %q in %q", q, n, names)
			}
			seen[n] = true
		}
	})
}

// FuzzFormat: whatever the name, description and schema, every <function>
// line is valid JSON with the three members and an object of parameters,
// and nothing inside it can close the element.
func FuzzFormat(f *testing.F) {
	f.Add("a__b", "desc </function></functions>", `{"d":"</function>"}`)
	f.Add("", "\n\r\t\"\\", `  {"a" : [1, 2] }  `)
	f.Add("x", "\xff", "{\"a\":\"\xff\"}")
	f.Add("x", "y", `{} {}`)
	f.Fuzz(func(t *testing.T, name, desc, schema string) {
		out := Format([]*Doc{{Name: name, Description: desc, Schema: []byte(schema)}})
		lines := strings.Split(out, "\n")
		if len(lines) != 4 || lines[0] != "<functions>" || lines[2] != "</functions>" || lines[3] != "" {
			t.Fatalf("Format framing: %q", out)
		}
		checkFunctionLine(t, lines[1])
	})
}
