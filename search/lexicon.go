package search

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"io"
	"strings"
	"sync"
)

// lexiconData is the synonym table generated from WordNet 3.0 by
// search/internal/genlexicon (docs/deferred-loading.md has its origin,
// licence and the command). Each line is "term<TAB>synonym terms"; lines
// starting with '#' carry WordNet's licence, which asks that it travel with
// every copy.
//
//go:embed lexicon.txt.gz
var lexiconData []byte

var (
	lexiconOnce sync.Once
	lexicon     map[string][]string // query stem -> synonym stems
)

// loadLexicon parses the embedded table once per process, on the first
// search. The table maps index terms to index terms (the generator analyzes
// WordNet's words with Terms and links each pair both ways), so loading is
// a split.
func loadLexicon() map[string][]string {
	lexiconOnce.Do(func() {
		lexicon = parseLexicon(lexiconData)
	})
	return lexicon
}

// parseLexicon reads the gzipped table. A damaged table gives an empty
// lexicon: search still works, without synonyms (TestLexiconLoads guards
// the real one).
func parseLexicon(gz []byte) map[string][]string {
	out := make(map[string][]string, 1<<15)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return out
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return map[string][]string{}
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		if term, syns, ok := strings.Cut(line, "\t"); ok {
			out[term] = strings.Fields(syns)
		}
	}
	return out
}
