package search

import (
	"bytes"
	"compress/gzip"
	"io"
	"slices"
	"strings"
	"testing"
)

// paraphraseCatalog has tools whose words a user is likely not to use.
func paraphraseCatalog() []Doc {
	return []Doc{
		{Name: "mongodb__drop-database", Description: "Removes the specified database, deleting the associated data files."},
		{Name: "mongodb__list-databases", Description: "List all databases for a MongoDB connection."},
		{Name: "everything__gzip-file", Description: "Compresses a single file using gzip compression."},
		{Name: "fs__read_file", Description: "Read the complete contents of a file."},
		{Name: "fs__write_file", Description: "Create a new file or overwrite an existing one."},
		{Name: "fs__create_directory", Description: "Create a new directory."},
		{Name: "fs__list_directory", Description: "List the entries of a directory."},
		{Name: "archive__save_report", Description: "Save a report for the billing team."},
		{Name: "datadog__mute_host", Description: "Mute a host in Datadog."},
		{Name: "datadog__list_hosts", Description: "Get list of hosts from Datadog."},
		{Name: "tracker__delete_ticket", Description: "Delete a ticket."},
		{Name: "tracker__remove_drop_ticket", Description: "Remove, drop or erase a ticket for good."},
	}
}

// TestSearchParaphrase: queries that share no word with the tool they want
// find it through the related-word table or the WordNet lexicon.
func TestSearchParaphrase(t *testing.T) {
	ix := Build(paraphraseCatalog())
	tests := []struct {
		name, query, want string // want: the first hit, or one of a comma-separated list
	}{
		{"related table: wipe is delete", "wipe the staging db", "mongodb__drop-database"},
		{"related table: machine is host", "silence notifications from that machine", "datadog__mute_host"},
		{"wordnet: squeeze is compress", "squeeze this json", "everything__gzip-file"},
		{"a file name means a file", "notes.txt", "fs__read_file,fs__write_file"},
		{"shell command mkdir", "mkdir -p build/out", "fs__create_directory"},
		{"shell command ls", "ls src", "fs__list_directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := ix.Search(tt.query, 5)
			if len(hits) == 0 || !slices.Contains(strings.Split(tt.want, ","), hits[0].Doc.Name) {
				t.Fatalf("Search(%q) = %v, want %s first", tt.query, names(hits), tt.want)
			}
		})
	}
}

// TestSearchWordTypedBeatsRelatedWords: a tool scores the best of a query
// word and its related words, not their sum, and a related word never
// counts more than the word typed: the tool that says "delete" ranks above
// one that says "remove", "drop" and "erase" (which the hand-written table
// relates to "delete") in its name and description.
func TestSearchWordTypedBeatsRelatedWords(t *testing.T) {
	ix := Build(paraphraseCatalog())
	hits := ix.Search("delete ticket", 2)
	if got := names(hits); len(got) != 2 || got[0] != "tracker__delete_ticket" {
		t.Fatalf("Search(delete ticket) = %v, want tracker__delete_ticket first", got)
	}
}

// TestLexiconLoads: the embedded WordNet table parses, links synonyms both
// ways, and carries WordNet's licence, which must travel with every copy.
func TestLexiconLoads(t *testing.T) {
	lex := loadLexicon()
	if len(lex) < 20000 {
		t.Fatalf("lexicon has %d entries, want the generated table's tens of thousands", len(lex))
	}
	has := func(from, to string) bool {
		for _, s := range lex[from] {
			if s == to {
				return true
			}
		}
		return false
	}
	// The generator wrote index terms: words whose term the table does not
	// know mean a table made with another analyzer (run the generator).
	for _, w := range []string{"delete", "deleting", "squeezed", "photographs", "compresses", "erase"} {
		if got := Terms(w); len(got) != 1 || len(lex[got[0]]) == 0 {
			t.Errorf("the lexicon has no synonyms for %q (terms %v): regenerate lexicon.txt.gz (go run ./search/internal/genlexicon)", w, got)
		}
	}
	if !has(stem("compress"), stem("squeeze")) || !has(stem("squeeze"), stem("compress")) {
		t.Errorf("compress/squeeze not linked both ways: %v / %v", lex[stem("compress")], lex[stem("squeeze")])
	}
	zr, err := gzip.NewReader(bytes.NewReader(lexiconData))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "WordNet 3.0 Copyright 2006 by Princeton University.  All rights reserved.") {
		t.Error("lexicon.txt.gz lacks WordNet's copyright notice")
	}
}

func TestParseLexiconDamaged(t *testing.T) {
	if got := parseLexicon([]byte("not gzip")); len(got) != 0 {
		t.Fatalf("parseLexicon(garbage) = %d entries, want none", len(got))
	}
}

// BenchmarkParseLexicon is the one-time cost of the first search in a
// process.
func BenchmarkParseLexicon(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		parseLexicon(lexiconData)
	}
}

// TestSearchImpliedTerms: what a query implies without saying it.
func TestSearchImpliedTerms(t *testing.T) {
	ix := Build([]Doc{
		{Name: "chat__list_channels", Description: "List the channels of the workspace."},
		{Name: "chat__get_channel_history", Description: "Get the recent messages of a channel."},
		{Name: "chat__get_thread", Description: "Get the messages of a thread."},
		{Name: "tracker__users_get_current", Description: "Get the current user."},
		{Name: "tracker__users_search", Description: "Search users by name."},
		{Name: "tracker__logs_get", Description: "Get the audit log of the workspace."},
		{Name: "apps__create_application", Description: "Create an application."},
		{Name: "apps__get_application", Description: "Get an application by name."},
		{Name: "apps__list_applications", Description: "Return the applications."},
	})
	tests := []struct {
		name, query, want string
	}{
		{"#name is a channel", "what did people say in #random today", "chat__get_channel_history"},
		{"logged in as is the current user", "who am I logged in as", "tracker__users_get_current"},
		{"two nouns ending in a plural ask for a list", "apps applications", "apps__list_applications"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := ix.Search(tt.query, 5)
			if len(hits) == 0 || hits[0].Doc.Name != tt.want {
				t.Fatalf("Search(%q) = %v, want %s first", tt.query, names(hits), tt.want)
			}
		})
	}
}

// TestSearchImpliedListFindsNothingAlone: the "list" a verbless plural
// implies ranks among the tools the query's words found, and brings none
// in by itself, so a query about what no tool has still finds nothing.
func TestSearchImpliedListFindsNothingAlone(t *testing.T) {
	ix := Build([]Doc{{Name: "fs__list_directory", Description: "List the entries of a directory."}})
	if hits := ix.Search("kubernetes pods", 5); hits != nil {
		t.Fatalf("Search(kubernetes pods) = %v, want nil", names(hits))
	}
}

func TestIndexFold(t *testing.T) {
	tests := []struct {
		s, needle string
		want      int
	}{
		{"Who am I logged in as", "who am i", 0},
		{"who am in charge", "who am i", -1},
		{"tell me who am I", "who am i", 8},
		{"blogged into", "logged in", -1},
		{"", "logged in", -1},
	}
	for _, tt := range tests {
		if got := indexFold(tt.s, tt.needle); got != tt.want {
			t.Errorf("indexFold(%q, %q) = %d, want %d", tt.s, tt.needle, got, tt.want)
		}
	}
}
