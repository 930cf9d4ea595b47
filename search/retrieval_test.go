package search

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// ranker is one ranking under comparison.
type ranker struct {
	name   string
	search func(query string, max int) []Hit
}

// recall holds the retrieval figures of one ranker.
type recall struct {
	at1, at5 int
	rr       float64 // sum of reciprocal ranks within the top 5
	misses   []string
}

func measure(r ranker, qs queryFile) recall {
	var m recall
	for _, q := range qs.Queries {
		hits := r.search(q.Query, 5)
		rank := 0
		for i, h := range hits {
			if h.Doc.Name == q.Expect {
				rank = i + 1
				break
			}
		}
		switch {
		case rank == 1:
			m.at1++
			m.at5++
		case rank > 1:
			m.at5++
		}
		if rank > 0 {
			m.rr += 1 / float64(rank)
		} else {
			var got []string
			for _, h := range hits {
				got = append(got, h.Doc.Name)
			}
			m.misses = append(m.misses, fmt.Sprintf("%q want %s, got %v", q.Query, q.Expect, got))
		}
	}
	return m
}

// TestRetrieval compares Search with the seed's ranking on the benchmark
// catalog (testdata/catalog.json) and queries (testdata/queries.json).
func TestRetrieval(t *testing.T) {
	docs := loadCatalog(t)
	qs := loadQueries(t)
	if len(docs) < 150 || len(qs.Queries) < 100 {
		t.Fatalf("benchmark too small: %d tools, %d queries", len(docs), len(qs.Queries))
	}
	names := make(map[string]bool, len(docs))
	for _, d := range docs {
		if names[d.Name] {
			t.Fatalf("duplicate tool %s in catalog", d.Name)
		}
		names[d.Name] = true
	}
	for _, q := range qs.Queries {
		if !names[q.Expect] {
			t.Fatalf("query %q expects unknown tool %s", q.Query, q.Expect)
		}
	}

	ix := Build(docs)
	byName := append([]Doc(nil), docs...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].Name < byName[j].Name })
	rankers := []ranker{
		{"ours (BM25F)", ix.Search},
		{"seed, catalog order", func(q string, max int) []Hit { return SearchSeed(docs, q, max) }},
		{"seed, ties by name", func(q string, max int) []Hit { return SearchSeed(byName, q, max) }},
	}
	results := make([]recall, len(rankers))
	n := float64(len(qs.Queries))
	var table strings.Builder
	fmt.Fprintf(&table, "\n%d queries, %d tools\n%-22s %9s %9s %7s\n", len(qs.Queries), len(docs), "ranking", "recall@1", "recall@5", "MRR@5")
	for i, r := range rankers {
		results[i] = measure(r, qs)
		fmt.Fprintf(&table, "%-22s %9.3f %9.3f %7.3f\n", r.name, float64(results[i].at1)/n, float64(results[i].at5)/n, results[i].rr/n)
	}
	t.Log(table.String())
	for _, miss := range results[0].misses {
		t.Logf("ours missed: %s", miss)
	}

	ours := results[0]
	for i, seed := range results[1:] {
		if ours.at5 <= seed.at5 {
			t.Errorf("recall@5: ours %d/%d does not beat %s %d/%d", ours.at5, len(qs.Queries), rankers[i+1].name, seed.at5, len(qs.Queries))
		}
		if ours.at1 < seed.at1 {
			t.Errorf("recall@1: ours %d/%d is below %s %d/%d", ours.at1, len(qs.Queries), rankers[i+1].name, seed.at1, len(qs.Queries))
		}
	}
}
