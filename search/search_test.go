package search

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// smallCatalog is a hand-made catalog for behaviour tests.
func smallCatalog() []Doc {
	return []Doc{
		{Name: "filesystem__read_file", Description: "Read the complete contents of a file.", Schema: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "filesystem__write_file", Description: "Create or overwrite a file with new content.", Schema: []byte(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)},
		{Name: "filesystem__list_directory", Description: "Get a listing of the entries of a directory.", Schema: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "github__create_issue", Description: "Open a new issue in a GitHub repository.", Schema: []byte(`{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"}}}`)},
		{Name: "github__create_pull_request", Description: "Open a pull request between two branches.", Schema: []byte(`{"type":"object","properties":{"head":{"type":"string"},"base":{"type":"string"}}}`)},
		{Name: "slack__slack_post_message", Description: "Send a message to a channel.", Schema: []byte(`{"type":"object","properties":{"channel_id":{"type":"string","description":"Channel to write to."}}}`)},
		{Name: "time__get_current_time", Description: "Current time in a time zone.", Schema: []byte(`{"type":"object","properties":{"timezone":{"type":"string","description":"IANA name."}}}`)},
		{Name: "kubernetes__kubectl_get", Description: "List resources in the cluster.", Schema: []byte(`not json`)},
	}
}

func names(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Doc.Name)
	}
	return out
}

func TestSearchTop(t *testing.T) {
	ix := Build(smallCatalog())
	tests := []struct {
		name  string
		query string
		want  string // expected first hit
	}{
		{"name words", "read file", "filesystem__read_file"},
		{"synonym folder to directory", "show the folder", "filesystem__list_directory"},
		{"abbreviation pr", "open a PR", "github__create_pull_request"},
		{"abbreviation repo", "new issue in my repo", "github__create_issue"},
		{"stemming", "writing files", "filesystem__write_file"},
		{"server name helps", "github issue", "github__create_issue"},
		{"server duplicate does not dominate", "slack message", "slack__slack_post_message"},
		{"parameter description", "IANA", "time__get_current_time"},
		{"parameter name camel and abbreviation", "time zone", "time__get_current_time"},
		{"prefix of a longer word", "kubectl listing", "kubernetes__kubectl_get"},
		{"exact tool name", "filesystem__write_file", "filesystem__write_file"},
		{"exact tool part", "please use write_file", "filesystem__write_file"},
		{"related verb", "remove", ""}, // no tool deletes: no match at all
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := ix.Search(tt.query, 5)
			if tt.want == "" {
				if hits != nil {
					t.Fatalf("Search(%q) = %v, want nil", tt.query, names(hits))
				}
				return
			}
			if len(hits) == 0 || hits[0].Doc.Name != tt.want {
				t.Fatalf("Search(%q) = %v, want %s first", tt.query, names(hits), tt.want)
			}
		})
	}
}

func TestSearchNil(t *testing.T) {
	ix := Build(smallCatalog())
	for _, q := range []string{"", "   ", "the of and what is", "?!.,", "zzzz", "a b c"} {
		if hits := ix.Search(q, 5); hits != nil {
			t.Errorf("Search(%q) = %v, want nil", q, names(hits))
		}
	}
	if hits := ix.Search("file", 0); hits != nil {
		t.Errorf("max 0: got %v", names(hits))
	}
	if hits := ix.Search("file", -3); hits != nil {
		t.Errorf("max -3: got %v", names(hits))
	}
	if hits := Build(nil).Search("file", 5); hits != nil {
		t.Errorf("empty index: got %v", names(hits))
	}
}

func TestSearchMax(t *testing.T) {
	ix := Build(smallCatalog())
	all := ix.Search("file directory issue message time resources pull", 100)
	if len(all) != 8 {
		t.Fatalf("broad query matched %d of 8: %v", len(all), names(all))
	}
	for max := 1; max <= 9; max++ {
		hits := ix.Search("file directory issue message time resources pull", max)
		want := min(max, len(all))
		if len(hits) != want {
			t.Fatalf("max %d: %d hits", max, len(hits))
		}
		if !reflect.DeepEqual(names(hits), names(all[:want])) {
			t.Fatalf("max %d: %v is not the head of %v", max, names(hits), names(all))
		}
	}
}

func TestSearchOrderAndTies(t *testing.T) {
	// Three identical documents but for their names tie exactly and come
	// back by name; a better match ranks above them.
	docs := []Doc{
		{Name: "c__fetch", Description: "Fetch a page."},
		{Name: "a__fetch", Description: "Fetch a page."},
		{Name: "b__fetch", Description: "Fetch a page."},
		{Name: "z__fetch_page", Description: "Fetch a web page by its address."},
	}
	hits := Build(docs).Search("fetch page", 10)
	if got, want := names(hits), []string{"z__fetch_page", "a__fetch", "b__fetch", "c__fetch"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if hits[1].Score != hits[2].Score || hits[2].Score != hits[3].Score {
		t.Errorf("identical documents scored %v %v %v", hits[1].Score, hits[2].Score, hits[3].Score)
	}
	checkSorted(t, hits)
}

func TestSearchDeterministicUnderShuffle(t *testing.T) {
	docs := loadCatalog(t)
	qs := loadQueries(t)
	want := Build(docs)
	rng := rand.New(rand.NewSource(1))
	for round := range 3 {
		shuffled := append([]Doc(nil), docs...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := Build(shuffled)
		for _, q := range qs.Queries {
			a, b := want.Search(q.Query, 10), got.Search(q.Query, 10)
			if len(a) != len(b) {
				t.Fatalf("round %d %q: %d vs %d hits", round, q.Query, len(a), len(b))
			}
			for i := range a {
				if a[i].Doc.Name != b[i].Doc.Name || a[i].Score != b[i].Score {
					t.Fatalf("round %d %q: hit %d %s %v vs %s %v", round, q.Query, i, a[i].Doc.Name, a[i].Score, b[i].Doc.Name, b[i].Score)
				}
			}
		}
	}
}

func TestSearchDuplicateNames(t *testing.T) {
	docs := []Doc{
		{Name: "x__dup", Description: "second copy about files"},
		{Name: "x__dup", Description: "first copy about files"},
	}
	for range 3 {
		hits := Build(docs).Search("files", 5)
		if len(hits) != 2 || hits[0].Doc.Description != "first copy about files" {
			t.Fatalf("duplicate names: %+v", hits)
		}
		docs[0], docs[1] = docs[1], docs[0]
	}
}

func TestBuildDoesNotKeepInput(t *testing.T) {
	docs := smallCatalog()
	ix := Build(docs)
	docs[0].Name = "changed__after_build"
	docs[0].Description = "nothing"
	hits := ix.Search("read file", 1)
	if len(hits) != 1 || hits[0].Doc.Name != "filesystem__read_file" {
		t.Fatalf("index changed with its input: %v", names(hits))
	}
}

func TestSearchLongQuery(t *testing.T) {
	ix := Build(smallCatalog())
	q := strings.Repeat("file ", 100000) + " issue"
	hits := ix.Search(q, 5)
	if len(hits) == 0 || !strings.Contains(hits[0].Doc.Name, "file") {
		t.Fatalf("long query: %v", names(hits))
	}
	for _, h := range hits {
		if h.Doc.Name == "github__create_issue" {
			t.Fatalf("words past the query limit were used: %v", names(hits))
		}
	}
}

func TestSearchConcurrent(t *testing.T) {
	docs := loadCatalog(t)
	qs := loadQueries(t)
	ix := Build(docs)
	want := make([][]string, len(qs.Queries))
	for i, q := range qs.Queries {
		want[i] = names(ix.Search(q.Query, 5))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				i := (g*31 + k) % len(qs.Queries)
				if got := names(ix.Search(qs.Queries[i].Query, 5)); !reflect.DeepEqual(got, want[i]) {
					errs <- fmt.Errorf("goroutine %d, %q: %v, want %v", g, qs.Queries[i].Query, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHostileSchemas(t *testing.T) {
	deep := strings.Repeat(`{"properties":{"x":`, 20000) + "{}" + strings.Repeat("}}", 20000)
	var many strings.Builder
	many.WriteString(`{"properties":{`)
	for i := range 5000 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `"p%04d":{"description":"param number %04d"}`, i, i)
	}
	many.WriteString("}}")
	huge := `{"properties":{"a":{"description":"` + strings.Repeat("x", maxSchemaBytes) + `"}}}`
	docs := []Doc{
		{Name: "a__deep", Description: "deep schema", Schema: []byte(deep)},
		{Name: "a__many", Description: "many params", Schema: []byte(many.String())},
		{Name: "a__huge", Description: "huge schema", Schema: []byte(huge)},
		{Name: "a__array", Description: "array schema", Schema: []byte(`[1,2,3]`)},
		{Name: "a__props_array", Description: "odd schema", Schema: []byte(`{"properties":[1]}`)},
		{Name: "a__null", Description: "null schema", Schema: []byte(`null`)},
		{Name: "a__bad", Description: "bad schema", Schema: []byte(`{"properties":{"p":`)},
	}
	ix := Build(docs)
	if hits := ix.Search("schema", 10); len(hits) != 6 {
		t.Fatalf("schema: %v", names(hits))
	}
	paramTerms := func(d *Doc) (n int) {
		analyzeDoc(d, func(f int, _ string) {
			if f == fieldParamName || f == fieldParamDesc {
				n++
			}
		})
		return n
	}
	// Only the first maxParams parameters are read: each gives two name
	// terms ("p0012" gives "0012" and "p0012") and three description terms
	// ("param", "number", "0012").
	if n := paramTerms(&docs[1]); n != 5*maxParams {
		t.Errorf("many params: %d parameter terms indexed, want %d", n, 5*maxParams)
	}
	// Too deep for the decoder, too big, not an object: no parameters.
	for _, i := range []int{0, 2, 3, 4, 5, 6} {
		if n := paramTerms(&docs[i]); n != 0 {
			t.Errorf("%s: %d parameter terms indexed", docs[i].Name, n)
		}
	}
}

// checkSorted fails unless hits are by score descending, then name ascending.
func checkSorted(t *testing.T, hits []Hit) {
	t.Helper()
	for i := 1; i < len(hits); i++ {
		a, b := hits[i-1], hits[i]
		if a.Score < b.Score || a.Score == b.Score && a.Doc.Name > b.Doc.Name {
			t.Fatalf("hits %d,%d out of order: %s %v, %s %v", i-1, i, a.Doc.Name, a.Score, b.Doc.Name, b.Score)
		}
	}
}
