package search

import (
	"sort"
	"strings"
	"unicode"
)

// Query bounds and weights.
const (
	// maxQueryTerms bounds the terms taken from one query (before related
	// words and prefixes are added); a model's query is a few words.
	maxQueryTerms = 64
	// minPrefixLen is the shortest query term that also matches longer
	// index terms starting with it ("config" → "configuration"). Shorter
	// ones match too much ("add" would match "address").
	minPrefixLen = 4
	// maxPrefixExpansions bounds the index terms one query term expands to.
	maxPrefixExpansions = 16
	// prefixWeight is the query weight of a prefix match: a partial word
	// is weak evidence.
	prefixWeight = 0.3
	// relatedWeight is the query weight of a word of the hand-written
	// related-word table (synonyms.go) for a query word that no tool has:
	// the related word is then all there is to go on, and it counts as
	// the word itself. For a query word some tool has it is
	// relatedKnownWeight, so a tool with the word as typed ranks first.
	relatedWeight      = 1.0
	relatedKnownWeight = 0.5
	// lexiconWeight is the query weight of a WordNet synonym (lexicon.go):
	// general English, so weaker evidence in a tool catalog than the
	// related-word table, which was written for one.
	lexiconWeight = 0.3
	// phraseWeight is the query weight of a term a query implies without
	// saying it: "file" for "notes.md", "channel" for "#general", "list"
	// for a verbless query about a plural ("slack channels").
	phraseWeight = 0.5
)

// queryPhrases are ways of asking whose words say little about the tool
// they want, or mislead ("logged" stems to "log"), with what they mean.
// Phrases are lowercase ASCII and matched case-insensitively.
var queryPhrases = []struct{ phrase, means string }{
	{"who am i", "current user"},
	{"logged in", "current user"},
	{"signed in", "current user"},
}

// indexFold returns the index of the first match of a lowercase ASCII
// needle in s that starts and ends at word boundaries, ignoring ASCII case,
// or -1 ("who am i" is not in "who am in charge").
func indexFold(s, needle string) int {
	for i := 0; i+len(needle) <= len(s); i++ {
		if !strings.EqualFold(s[i:i+len(needle)], needle) {
			continue
		}
		if i > 0 && isWordRune(rune(s[i-1])) {
			continue
		}
		if j := i + len(needle); j < len(s) && isWordRune(rune(s[j])) {
			continue
		}
		return i
	}
	return -1
}

// maxListQueryTerms is the most terms a query may have for a plural in it
// to mean "list": longer verbless queries describe what they want.
const maxListQueryTerms = 2

// operationVerbs are the stems of the verbs tools are named for; a query
// with none of them and a plural asks for a list.
var operationVerbs = toSet(Terms("list show get fetch retrieve create add make new delete remove drop " +
	"update edit change modify set search find query look send post reply write save store put run " +
	"execute start stop read open view move rename copy upload download push pull merge deploy " +
	"install close click type select scale restart count describe explain analyze generate draw " +
	"compare check sync apply export import")...)

func hasOperationVerb(terms []string) bool {
	for _, t := range terms {
		if operationVerbs[t] {
			return true
		}
	}
	return false
}

// endsInPlural reports whether the query's last word looks plural: four
// letters or more, ending in "s" but not "ss", "us" or "is" ("slack
// channels", not "which alerts are firing").
func endsInPlural(query string) bool {
	f := strings.Fields(strings.ToLower(query))
	if len(f) == 0 {
		return false
	}
	w := strings.TrimFunc(f[len(f)-1], func(r rune) bool { return !isWordRune(r) })
	return len(w) >= 4 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is") && !stopWords[w]
}

// Index terms the query heuristics add.
var (
	listTerm    = stem("list")
	channelTerm = stem("channel")
)

// qterm is one weighted query term.
type qterm struct {
	term string
	id   int32
	w    float64
	src  int // the query word it stands for: its own, or the one it was expanded from
	// maxIDF, when above 0, caps the term's IDF at its query word's: a
	// related word rarer than the word typed must not outscore it.
	maxIDF float32
	// boost terms only add to tools some other term found: a guess at
	// what the query implies must not bring in tools on its own.
	boost bool
}

// accumulator holds one query's per-document scores. Instances are pooled
// per index so a query allocates no per-document array.
type accumulator struct {
	scores  []float64
	touched []int32
	best    []float64 // one query word's best term score per document
	bestT   []int32   // documents with best != 0
}

func newAccumulator(n int) *accumulator {
	return &accumulator{scores: make([]float64, n), best: make([]float64, n)}
}

// Search returns at most max documents matching query, best first: by score
// descending, then by name ascending. It returns nil when max <= 0, when the
// query has no searchable words (empty, only stop words or punctuation) and
// when nothing matches. Only the first 8 KiB and 64 words of the query are
// used. Safe for concurrent use.
func (ix *Index) Search(query string, max int) []Hit {
	if max <= 0 || len(ix.docs) == 0 {
		return nil
	}
	qts := ix.queryTerms(query)
	if len(qts) == 0 {
		return nil
	}
	acc := ix.scratch.Get().(*accumulator)
	defer func() {
		for _, d := range acc.touched {
			acc.scores[d] = 0
		}
		acc.touched = acc.touched[:0]
		ix.scratch.Put(acc)
	}()
	add := func(d int32, c float64) {
		if acc.scores[d] == 0 {
			acc.touched = append(acc.touched, d)
		}
		acc.scores[d] += c
	}
	for i := 0; i < len(qts); {
		// One query word and its expansions: a document scores the best
		// of them, not their sum, so a word with many related words does
		// not outweigh a word of the query matched as typed.
		j := i
		for j < len(qts) && qts[j].src == qts[i].src {
			j++
		}
		for _, q := range qts[i:j] {
			ti := ix.info[q.id]
			idf := ti.idf
			if q.maxIDF > 0 && idf > q.maxIDF {
				idf = q.maxIDF
			}
			wq := q.w * float64(idf)
			for _, p := range ix.postings[ti.start:ti.end] {
				c := wq * float64(p.w)
				if c <= 0 {
					continue
				}
				if acc.best[p.doc] == 0 {
					acc.bestT = append(acc.bestT, p.doc)
				}
				if c > acc.best[p.doc] {
					acc.best[p.doc] = c
				}
			}
		}
		boost := qts[i].boost
		for _, d := range acc.bestT {
			if !boost || acc.scores[d] != 0 {
				add(d, acc.best[d])
			}
			acc.best[d] = 0
		}
		acc.bestT = acc.bestT[:0]
		i = j
	}
	if len(acc.touched) == 0 {
		return nil
	}
	top := selectTop(acc.scores, acc.touched, max)
	hits := make([]Hit, len(top))
	for i, d := range top {
		hits[i] = Hit{Doc: &ix.docs[d], Score: acc.scores[d]}
	}
	return hits
}

// queryTerms analyzes query into the index terms it looks for, each once
// with its highest weight, sorted by term so that scores are summed in the
// same order whatever the index's term ids are. Terms absent from the index
// are dropped.
func (ix *Index) queryTerms(query string) []qterm {
	if len(query) > maxTextBytes {
		query = query[:maxTextBytes]
	}
	var out []qterm
	src := 0
	var maxIDF float32
	at := make(map[int32]int, 32) // term id -> index in out
	set := func(term string, w float64) {
		id, ok := ix.terms[term]
		if !ok {
			return
		}
		if i, seen := at[id]; seen {
			if w > out[i].w {
				out[i].w = w
				out[i].src = src
				out[i].maxIDF = maxIDF
			}
			return
		}
		at[id] = len(out)
		out = append(out, qterm{term, id, w, src, maxIDF, false})
	}

	// Identifier-like words ("read_file", "github__create_issue",
	// "getTinyImage") also match a tool's name as a whole.
	nWords := 0
	for _, w := range strings.Fields(query) {
		if nWords++; nWords > maxQueryTerms {
			break
		}
		w = strings.TrimFunc(w, func(r rune) bool { return !isWordRune(r) })
		if looksLikeIdent(w) {
			src++
			set(identPrefix+strings.ToLower(w), 1)
		}
		if looksLikeFileName(w) {
			// "notes.md", "report.txt": the user means a file.
			src++
			set(fileTerm, phraseWeight)
		}
		if len(w) > 1 && strings.HasPrefix(strings.Fields(query)[nWords-1], "#") {
			// "#general": a chat channel.
			src++
			set(channelTerm, phraseWeight)
		}
	}

	// A few ways of asking mean something else than their words: the
	// phrase is read as its meaning.
	text := query
	for _, p := range queryPhrases {
		if i := indexFold(text, p.phrase); i >= 0 {
			text = text[:i] + " " + p.means + " " + text[i+len(p.phrase):]
		}
	}

	var base []string
	first := src + 1
	analyzer{}.terms(text, maxQueryTerms, func(t string) {
		base = append(base, t)
		src++
		set(t, 1)
	})
	lex := loadLexicon()
	for bi, t := range base {
		src = first + bi
		rw := relatedWeight
		if id, known := ix.terms[t]; known {
			rw = relatedKnownWeight
			maxIDF = ix.info[id].idf
		}
		for _, r := range related[t] {
			set(r, rw)
		}
		for _, r := range lex[t] {
			set(r, lexiconWeight)
		}
		maxIDF = 0
		if len(t) >= minPrefixLen {
			ix.prefixes(t, func(v string) { set(v, prefixWeight) })
		}
	}
	// Two nouns, the last a plural, and no verb ("argocd applications",
	// "slack channels") ask for a list: among the tools the nouns found.
	if len(base) > 0 && len(base) <= maxListQueryTerms && !hasOperationVerb(base) && endsInPlural(query) {
		src++
		set(listTerm, phraseWeight)
		for i := range out {
			if out[i].src == src {
				out[i].boost = true
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].boost != out[j].boost {
			return !out[i].boost // boost terms last, once every other score is in
		}
		if out[i].src != out[j].src {
			return out[i].src < out[j].src
		}
		return out[i].term < out[j].term
	})
	return out
}

// prefixes calls f with up to maxPrefixExpansions index terms that start
// with p and are longer than p, in sorted order.
func (ix *Index) prefixes(p string, f func(string)) {
	i := sort.SearchStrings(ix.vocab, p)
	for n := 0; i < len(ix.vocab) && n < maxPrefixExpansions; i++ {
		v := ix.vocab[i]
		if !strings.HasPrefix(v, p) {
			return
		}
		if len(v) > len(p) {
			f(v)
			n++
		}
	}
}

// fileTerm is the index term of the word "file".
var fileTerm = stem("file")

// looksLikeFileName reports whether a query word is written like a file
// name: a name, a dot, and an extension of one to five letters or digits
// with a letter in it ("notes.md", "main.go", "budget.xlsx"; not "v1.2",
// nor "document.title", whose ending is too long for an extension).
func looksLikeFileName(w string) bool {
	i := strings.LastIndexByte(w, '.')
	if i <= 0 || len(w)-i-1 < 1 || len(w)-i-1 > 4 {
		return false
	}
	letter := false
	for _, r := range w[i+1:] {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			letter = true
		case r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return letter && isWordRune(rune(w[i-1]))
}

// looksLikeIdent reports whether a query word is written like a tool name:
// it contains '_', '-' or '.' between word characters, or a lowercase letter
// followed by an uppercase one.
func looksLikeIdent(w string) bool {
	var prev rune
	for i, r := range w {
		if i > 0 && (r == '_' || r == '-' || r == '.') {
			return true
		}
		if i > 0 && unicode.IsLower(prev) && unicode.IsUpper(r) {
			return true
		}
		prev = r
	}
	return false
}

// better reports whether document a ranks before b: higher score, then lower
// index (the index is sorted by name).
func better(scores []float64, a, b int32) bool {
	if scores[a] != scores[b] {
		return scores[a] > scores[b]
	}
	return a < b
}

// selectTop returns the best k of cands, best first, using a bounded heap
// whose root is the worst document kept so far.
func selectTop(scores []float64, cands []int32, k int) []int32 {
	if k > len(cands) {
		k = len(cands)
	}
	h := make([]int32, 0, k)
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			w := l // the worse child
			if r := l + 1; r < len(h) && better(scores, h[l], h[r]) {
				w = r
			}
			if !better(scores, h[i], h[w]) {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for _, d := range cands {
		if len(h) < k {
			h = append(h, d)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !better(scores, h[p], h[i]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if better(scores, d, h[0]) {
			h[0] = d
			down(0)
		}
	}
	sort.Slice(h, func(i, j int) bool { return better(scores, h[i], h[j]) })
	return h
}
