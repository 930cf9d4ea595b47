// Command genlexicon writes search/lexicon.txt.gz, the synonym table that
// tool_search uses to match a query worded differently from a tool's
// description (docs/deferred-loading.md, "How ranking works"). It is run by
// hand, never at build or run time, after changing it or the search
// package's analyzer (TestLexiconLoads fails when the two disagree):
//
//	apt-get install wordnet-base
//	go run ./search/internal/genlexicon [-wordnet /usr/share/wordnet] [-out search/lexicon.txt.gz]
//
// It reads WordNet 3.0's index and data files (Princeton University; the
// licence is kept at the head of the output, as it requires) and, for every
// single lowercase word, takes its most frequent senses: the other words of
// those senses' synsets and their derivationally related forms ("creation"
// for "create") are its synonyms. Hypernyms, hyponyms, "similar to",
// "also see", entailment, cause, the derived forms of a sense's other words
// and the words of its definition were measured too, as weaker related
// words, and found nothing the benchmark did not lose elsewhere, so the
// table leaves them out (docs/deferred-loading.md, "What else was
// measured"). The output has one line per index term,
//
//	term<TAB>synonym terms
//
// in the search package's analysis (search.Terms), linked both ways.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/search"
)

// Selection bounds. WordNet lists a word's senses most frequent first (by
// the tagged concordance counts); rare senses are what make a thesaurus
// noisy ("list" as a ship's tilt), so only the first few are taken, and
// only those seen in the concordance when there is more than one.
const (
	maxSenses     = 3  // senses of one word per part of speech
	maxSynonyms   = 12 // synonyms kept per word
	maxWordLength = 20 // longer words are not what users type
)

// posFiles are WordNet's files by part of speech, with the letter its
// pointers use for that part.
var posFiles = []string{"noun", "verb", "adj", "adv"}

var posLetter = map[string]string{"noun": "n", "verb": "v", "adj": "a", "adv": "r"}

// synset is one WordNet synset: its words and its pointers.
type synset struct {
	words []string
	ptrs  []pointer
}

type pointer struct {
	symbol   string
	key      string // pos + offset of the target synset
	src, dst int    // word numbers (1-based), 0 for the whole synset
}

func main() {
	dir := flag.String("wordnet", "/usr/share/wordnet", "WordNet 3.0 dict directory (Debian: wordnet-base)")
	out := flag.String("out", filepath.Join("search", "lexicon.txt.gz"), "output file")
	flag.Parse()
	if err := run(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "genlexicon:", err)
		os.Exit(1)
	}
}

func run(dir, out string) error {
	synsets := map[string]*synset{}
	var licence []string
	for _, pos := range posFiles {
		lic, err := readData(filepath.Join(dir, "data."+pos), synsets)
		if err != nil {
			return err
		}
		if licence == nil {
			licence = lic
		}
	}
	type entry struct{ syn []string }
	entries := map[string]*entry{}
	for _, pos := range posFiles {
		f, err := os.Open(filepath.Join(dir, "index."+pos))
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, " ") {
				continue
			}
			fs := strings.Fields(line)
			if len(fs) < 4 || !plainWord(fs[0]) {
				continue
			}
			lemma := fs[0]
			nSyn, _ := strconv.Atoi(fs[2])
			nPtr, _ := strconv.Atoi(fs[3])
			if len(fs) < 6+nPtr {
				continue
			}
			tagged, _ := strconv.Atoi(fs[5+nPtr])
			offsets := fs[6+nPtr:]
			if len(offsets) > nSyn {
				offsets = offsets[:nSyn]
			}
			// Untagged words (never seen in the concordance; much of
			// computing's vocabulary: "delete", "database") keep their
			// first sense.
			n := min(maxSenses, max(tagged, 1))
			if len(offsets) > n {
				offsets = offsets[:n]
			}
			e := entries[lemma]
			if e == nil {
				e = &entry{}
				entries[lemma] = e
			}
			for _, off := range offsets {
				ss := synsets[posLetter[pos]+off]
				if ss == nil {
					continue
				}
				self := 0
				for i, w := range ss.words {
					if w == lemma {
						self = i + 1
					}
				}
				if self == 0 {
					continue // the lemma is capitalized here: a name
				}
				e.syn = append(e.syn, ss.words...)
				for _, p := range ss.ptrs {
					t := synsets[p.key]
					if t == nil {
						continue
					}
					if p.symbol == "+" && p.src == self && p.dst > 0 && p.dst <= len(t.words) {
						e.syn = append(e.syn, t.words[p.dst-1])
					}
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}

	// The table holds index terms, as the search package analyzes words
	// (stop words dropped, stemmed, abbreviations expanded), linked both
	// ways: synonymy is symmetric, but a word's line lists only its most
	// frequent senses ("compress" lists "squeeze"; "squeeze" then finds
	// "compress" too). Loading it is then a split, not an analysis.
	type pair struct{ a, b string }
	var pairs []pair
	for w, e := range entries {
		keys := search.Terms(w)
		if len(keys) != 1 {
			continue // stop words, abbreviations the search package expands
		}
		for _, syn := range pick(e.syn, map[string]bool{w: true}, maxSynonyms) {
			for _, t := range search.Terms(syn) {
				if t != keys[0] {
					pairs = append(pairs, pair{keys[0], t}, pair{t, keys[0]})
				}
			}
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].a != pairs[j].a {
			return pairs[i].a < pairs[j].a
		}
		return pairs[i].b < pairs[j].b
	})
	var body bytes.Buffer
	for _, l := range licence {
		fmt.Fprintf(&body, "#%s\n", l)
	}
	lines := 0
	for i := 0; i < len(pairs); {
		j := i
		var syns []string
		for ; j < len(pairs) && pairs[j].a == pairs[i].a; j++ {
			if len(syns) == 0 || syns[len(syns)-1] != pairs[j].b {
				syns = append(syns, pairs[j].b)
			}
		}
		fmt.Fprintf(&body, "%s\t%s\n", pairs[i].a, strings.Join(syns, " "))
		lines++
		i = j
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.Write(body.Bytes())
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(out, gz.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: %d words, %d bytes (%d uncompressed)\n", out, lines, gz.Len(), body.Len())
	return nil
}

// pick returns up to n plain words of ws not in seen, in order, marking them.
func pick(ws []string, seen map[string]bool, n int) []string {
	var out []string
	for _, w := range ws {
		if len(out) == n {
			break
		}
		if !plainWord(w) || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// plainWord reports whether w is one lowercase ASCII word of 2 to
// maxWordLength letters (no collocations, names or abbreviations with dots).
func plainWord(w string) bool {
	if len(w) < 2 || len(w) > maxWordLength {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// readData loads one data.<pos> file into synsets, keyed by pos letter and
// offset, and returns its licence header lines.
func readData(path string, synsets map[string]*synset) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var licence []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") {
			licence = append(licence, strings.TrimPrefix(line, "  "))
			continue
		}
		head, _, _ := strings.Cut(line, " | ")
		fs := strings.Fields(head)
		if len(fs) < 4 {
			continue
		}
		pos := fs[2]
		if pos == "s" {
			pos = "a" // adjective satellites live in data.adj
		}
		nw, err := strconv.ParseInt(fs[3], 16, 32)
		if err != nil || len(fs) < 4+2*int(nw)+1 {
			return nil, fmt.Errorf("%s: bad line %.40q", path, line)
		}
		ss := &synset{}
		for i := 0; i < int(nw); i++ {
			w := fs[4+2*i]
			if j := strings.IndexByte(w, '('); j > 0 {
				w = w[:j] // adjective markers: "(a)", "(p)", "(ip)"
			}
			ss.words = append(ss.words, w)
		}
		i := 4 + 2*int(nw)
		np, _ := strconv.Atoi(fs[i])
		i++
		for k := 0; k < np && i+3 < len(fs); k++ {
			sym, off, tpos, st := fs[i], fs[i+1], fs[i+2], fs[i+3]
			i += 4
			if tpos == "s" {
				tpos = "a"
			}
			src, _ := strconv.ParseInt(st[:2], 16, 32)
			dst, _ := strconv.ParseInt(st[2:], 16, 32)
			ss.ptrs = append(ss.ptrs, pointer{symbol: sym, key: tpos + off, src: int(src), dst: int(dst)})
		}
		synsets[pos+fs[0]] = ss
	}
	return licence, sc.Err()
}
