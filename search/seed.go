package search

import (
	"sort"
	"strings"
)

// SeedScore is the seed's relevance score of d for query: how many of the
// query's whitespace-separated terms (ASCII-lowercased) occur as substrings
// of "<name> <description>" (ASCII-lowercased). It is kept for comparison
// with Search; the proxy does not rank with it.
func SeedScore(query string, d *Doc) int {
	return seedScore(seedTerms(query), d)
}

// SearchSeed ranks docs the way the seed did: documents with a positive
// SeedScore, by score descending, ties kept in input order (a stable sort),
// at most max of them. An empty query returns the first max documents, as
// the seed did. Hits point into docs. max <= 0 returns nil.
func SearchSeed(docs []Doc, query string, max int) []Hit {
	if max <= 0 {
		return nil
	}
	terms := seedTerms(query)
	var hits []Hit
	if len(terms) == 0 {
		for i := range docs {
			if len(hits) == max {
				break
			}
			hits = append(hits, Hit{Doc: &docs[i]})
		}
		return hits
	}
	for i := range docs {
		if s := seedScore(terms, &docs[i]); s > 0 {
			hits = append(hits, Hit{Doc: &docs[i], Score: float64(s)})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	if len(hits) > max {
		hits = hits[:max]
	}
	return hits
}

func seedTerms(query string) []string {
	terms := strings.Fields(query)
	for i, t := range terms {
		terms[i] = asciiLower(t)
	}
	return terms
}

func seedScore(terms []string, d *Doc) int {
	hay := asciiLower(d.Name) + " " + asciiLower(d.Description)
	n := 0
	for _, t := range terms {
		if strings.Contains(hay, t) {
			n++
		}
	}
	return n
}

// asciiLower lowercases ASCII letters only, like the seed's
// to_ascii_lowercase.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
