package search

import (
	"reflect"
	"testing"
)

func TestSeedScore(t *testing.T) {
	d := &Doc{Name: "filesystem__read_file", Description: "Read a FILE from disk"}
	tests := []struct {
		query string
		want  int
	}{
		{"read file", 2},
		{"READ", 1},           // ASCII-lowercased
		{"a", 1},              // substrings count, stop words too
		{"ead ilesys", 2},     // inside words
		{"read read", 2},      // every term counts, repeated or not
		{"file?", 0},          // punctuation stays part of the term
		{"write", 0},          //
		{"", 0},               //
		{"fs__read", 0},       // whole term must be a substring
		{"system__read", 1},   // spanning the name's parts
		{"disk\tfrom\n", 2},   // any white space separates
		{"ÄRGER", 0},          // non-ASCII letters are not folded
		{"file from disk", 3}, //
	}
	for _, tt := range tests {
		if got := SeedScore(tt.query, d); got != tt.want {
			t.Errorf("SeedScore(%q) = %d, want %d", tt.query, got, tt.want)
		}
	}
}

func TestSearchSeed(t *testing.T) {
	docs := []Doc{
		{Name: "b__write_file", Description: "Write a file"},
		{Name: "a__read_file", Description: "Read a file"},
		{Name: "c__git_log", Description: "Show the log"},
	}
	tests := []struct {
		name  string
		query string
		max   int
		want  []string
	}{
		{"ranked by hits", "read file", 5, []string{"a__read_file", "b__write_file"}},
		{"ties keep input order", "file", 5, []string{"b__write_file", "a__read_file"}},
		{"max", "file", 1, []string{"b__write_file"}},
		{"no match", "zzz", 5, nil},
		{"empty query lists the first max", "  ", 2, []string{"b__write_file", "a__read_file"}},
		{"max 0", "file", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(SearchSeed(docs, tt.query, tt.max)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SearchSeed(%q, %d) = %v, want %v", tt.query, tt.max, got, tt.want)
			}
		})
	}
	hits := SearchSeed(docs, "read file", 5)
	if hits[0].Doc != &docs[1] || hits[0].Score != 2 || hits[1].Score != 1 {
		t.Errorf("hits should point into docs with seed scores: %+v", hits)
	}
}
