package search

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// catalogFile is the JSON layout of testdata/catalog.json.
type catalogFile struct {
	About  string `json:"about"`
	Groups []struct {
		Server string            `json:"server"`
		Source string            `json:"source"`
		Tools  []json.RawMessage `json:"tools"`
	} `json:"groups"`
}

// queryFile is the JSON layout of testdata/queries.json.
type queryFile struct {
	About   string `json:"about"`
	Queries []struct {
		Query  string `json:"query"`
		Expect string `json:"expect"`
	} `json:"queries"`
}

// loadCatalog returns the benchmark catalog's tools as Docs, in file order
// (the order the seed would have listed them in).
func loadCatalog(tb testing.TB) []Doc {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "catalog.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var c catalogFile
	if err := json.Unmarshal(data, &c); err != nil {
		tb.Fatalf("catalog.json: %v", err)
	}
	var docs []Doc
	for _, g := range c.Groups {
		if g.Source == "" {
			tb.Fatalf("catalog.json: group %q has no source", g.Server)
		}
		for _, raw := range g.Tools {
			var tool struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			if err := json.Unmarshal(raw, &tool); err != nil {
				tb.Fatalf("catalog.json: %v", err)
			}
			docs = append(docs, Doc{Name: tool.Name, Description: tool.Description, Schema: tool.InputSchema, Raw: raw})
		}
	}
	return docs
}

func loadQueries(tb testing.TB) queryFile {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "queries.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var q queryFile
	if err := json.Unmarshal(data, &q); err != nil {
		tb.Fatalf("queries.json: %v", err)
	}
	return q
}
