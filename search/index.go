package search

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"sync"
)

// Doc is one tool that the index can return.
type Doc struct {
	// Name is the exposed tool name, e.g. "github__create_issue".
	Name string
	// Server optionally names the tool's server. When set, its words count
	// in the server field even if Name does not start with "<server>__"
	// (bare names, the hermes style, a prefix).
	Server string
	// Description is the tool's description as exposed.
	Description string
	// Schema is the tool's inputSchema as raw JSON. It may be missing,
	// invalid or huge: the index then simply reads no parameters from it.
	Schema json.RawMessage
	// Raw is the full tool object; the index never reads it.
	Raw json.RawMessage
}

// Hit is one search result.
type Hit struct {
	// Doc points into the index's own copy of the documents (or, for
	// SearchSeed, into the caller's slice). It must not be modified.
	Doc   *Doc
	Score float64
}

// Fields of a document, each with its own weight and length normalization
// (BM25F).
const (
	fieldName      = iota // words of the tool part of the name
	fieldServer           // words of the server part of the name and of Doc.Server
	fieldDesc             // description
	fieldParamName        // parameter names
	fieldParamDesc        // parameter descriptions and enum values
	numFields
)

// Ranking parameters. The weights say how much one occurrence of a term in a
// field is worth: a word of the tool's name is the strongest evidence, the
// server part is useful context that must not swamp the rest (every tool of
// a server shares it), parameters count half as much as the description
// (names like "path" or "owner" recur across many tools, and parameter
// descriptions are long and noisy). b is BM25's length normalization per
// field: short fields (names) hardly need it. k1 is BM25's term-frequency
// saturation. On the benchmark (TestRetrieval) recall@5 moves by at most 2
// of 147 queries over a wide range of these values (docs/deferred-loading.md).
var (
	fieldWeight = [numFields]float64{3.0, 1.0, 1.0, 0.5, 0.25}
	fieldB      = [numFields]float64{0.3, 0.0, 0.75, 0.5, 0.75}
)

const k1 = 1.2

// entriesPerDocGuess sizes Build's scratch list of (term, document) pairs;
// real tools have 20 to 60 distinct terms, and the list grows if needed.
const entriesPerDocGuess = 32

// identPrefix starts the special terms that stand for a whole identifier
// (the exposed name, its tool part, an identifier-like query word). The
// tokenizer never produces it, so these terms only ever meet each other.
const identPrefix = "\x00"

// posting is one (term, document) pair: the document index and the term's
// BM25F weight in it (tf saturated and length-normalized, without IDF).
type posting struct {
	doc int32
	w   float32
}

// termInfo locates a term's postings and holds its IDF.
type termInfo struct {
	start, end int32
	idf        float32
}

// Index ranks tools against free-text queries. It is immutable after Build
// and safe for concurrent use by any number of goroutines.
type Index struct {
	docs     []Doc            // sorted by name: index order is the tie-break
	terms    map[string]int32 // term -> id
	info     []termInfo       // by term id
	postings []posting        // all postings, grouped by term, docs ascending
	vocab    []string         // every term, sorted, for prefix lookups
	vocabID  []int32          // term id of vocab[i]
	scratch  sync.Pool        // *accumulator
}

// Build indexes docs. It copies the Doc values (not the bytes they point
// to) and does not keep docs. Documents are ordered by name (then
// description, then schema) so results never depend on the order of docs.
func Build(docs []Doc) *Index {
	ix := &Index{docs: make([]Doc, len(docs)), terms: make(map[string]int32)}
	copy(ix.docs, docs)
	sort.SliceStable(ix.docs, func(i, j int) bool {
		a, b := &ix.docs[i], &ix.docs[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Description != b.Description {
			return a.Description < b.Description
		}
		return string(a.Schema) < string(b.Schema)
	})

	type entry struct {
		term int32
		doc  int32
		tf   [numFields]uint16
	}
	var (
		entries = make([]entry, 0, entriesPerDocGuess*len(ix.docs))
		lens    = make([][numFields]float32, len(ix.docs))
		sumLen  [numFields]float64
		perDoc  = make(map[string]*[numFields]uint16)
		pool    []*[numFields]uint16
	)
	for d := range ix.docs {
		clear(perDoc)
		used := 0
		add := func(field int, term string) {
			tf, ok := perDoc[term]
			if !ok {
				if used == len(pool) {
					pool = append(pool, new([numFields]uint16))
				}
				tf = pool[used]
				*tf = [numFields]uint16{}
				used++
				perDoc[term] = tf
			}
			if tf[field] < math.MaxUint16 {
				tf[field]++
			}
			lens[d][field]++
		}
		analyzeDoc(&ix.docs[d], add)
		for f := range numFields {
			sumLen[f] += float64(lens[d][f])
		}
		for term, tf := range perDoc {
			id, ok := ix.terms[term]
			if !ok {
				id = int32(len(ix.info))
				ix.terms[strings.Clone(term)] = id
				ix.info = append(ix.info, termInfo{})
			}
			entries = append(entries, entry{term: id, doc: int32(d), tf: *tf})
			ix.info[id].end++ // document frequency for now
		}
	}

	var avgLen [numFields]float64
	for f := range numFields {
		if len(ix.docs) > 0 {
			avgLen[f] = sumLen[f] / float64(len(ix.docs))
		}
	}
	n := float64(len(ix.docs))
	var off int32
	for id := range ix.info {
		df := ix.info[id].end
		ix.info[id] = termInfo{
			start: off,
			end:   off,
			idf:   float32(math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))),
		}
		off += df
	}
	ix.postings = make([]posting, len(entries))
	// entries are in document order, so each term's postings come out
	// sorted by document.
	for _, e := range entries {
		var tfw float64
		for f := range numFields {
			if e.tf[f] == 0 {
				continue
			}
			norm := 1 - fieldB[f]
			if avgLen[f] > 0 {
				norm += fieldB[f] * float64(lens[e.doc][f]) / avgLen[f]
			}
			tfw += fieldWeight[f] * float64(e.tf[f]) / norm
		}
		ti := &ix.info[e.term]
		ix.postings[ti.end] = posting{doc: e.doc, w: float32(tfw * (k1 + 1) / (tfw + k1))}
		ti.end++
	}

	ix.vocab = make([]string, 0, len(ix.terms))
	for t := range ix.terms {
		ix.vocab = append(ix.vocab, t)
	}
	sort.Strings(ix.vocab)
	ix.vocabID = make([]int32, len(ix.vocab))
	for i, t := range ix.vocab {
		ix.vocabID[i] = ix.terms[t]
	}
	ix.scratch.New = func() any { return newAccumulator(len(ix.docs)) }
	return ix
}

// Len returns the number of indexed documents.
func (ix *Index) Len() int { return len(ix.docs) }

// analyzeDoc feeds every term of d to add with its field.
func analyzeDoc(d *Doc, add func(field int, term string)) {
	var a analyzer
	server, tool := splitName(d.Name)
	serverTerms := make(map[string]bool)
	addServer := func(t string) {
		serverTerms[t] = true
		add(fieldServer, t)
	}
	a.terms(server, maxTokensPerField, addServer)
	if d.Server != "" && !strings.EqualFold(d.Server, server) {
		a.terms(d.Server, maxTokensPerField, addServer)
	}

	// The tool part often repeats the server ("slack__slack_post_message",
	// hermes "mcp_github_create_issue"): leading server words are left out
	// of the name field, so they count once, in the server field.
	leading := true
	a.terms(tool, maxTokensPerField, func(t string) {
		if leading && serverTerms[t] {
			return
		}
		leading = false
		add(fieldName, t)
	})
	add(fieldName, identPrefix+strings.ToLower(d.Name))
	if tool != d.Name {
		add(fieldName, identPrefix+strings.ToLower(tool))
	}

	a.terms(d.Description, maxTokensPerField, func(t string) { add(fieldDesc, t) })

	nParamNames, nParamDesc := 0, 0
	walkParams(d.Schema,
		func(name string) {
			if left := maxTokensPerField - nParamNames; left > 0 {
				a.terms(name, left, func(t string) {
					nParamNames++
					add(fieldParamName, t)
				})
			}
		},
		func(desc string) {
			if left := maxTokensPerField - nParamDesc; left > 0 {
				a.terms(desc, left, func(t string) {
					nParamDesc++
					add(fieldParamDesc, t)
				})
			}
		})
}

// splitName splits an exposed name at its first "__" into the server (or
// prefix) part and the tool part. A name without "__" is all tool.
func splitName(name string) (server, tool string) {
	if i := strings.Index(name, "__"); i > 0 && i+2 < len(name) {
		return name[:i], name[i+2:]
	}
	return "", name
}
