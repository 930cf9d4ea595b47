package search

import (
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"
)

// synthSize is the catalog size of the scale benchmarks.
const synthSize = 10000

// Words that vary the synthesized copies of the benchmark catalog, so that
// the vocabulary and the document lengths grow as in a real large catalog
// (many servers of the same kinds, for different teams and environments).
var (
	synthTenants = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka",
		"tyrell", "cyberdyne", "soylent", "aperture", "vandelay", "pied", "dunder", "gekko", "oscorp",
		"nakatomi", "monarch", "zorg"}
	synthEnvs   = []string{"prod", "staging", "dev", "eu", "us", "apac", "legacy", "sandbox", "internal", "partner"}
	synthScopes = []string{
		"Scoped to the production workspace.",
		"Used by the billing team; results may lag a minute.",
		"Read-only replica kept for reporting.",
		"Part of the legacy integration, kept for compatibility.",
		"Rate limited to 60 calls per minute.",
		"Owned by the platform group; ask before bulk changes.",
		"Mirrors the upstream API one to one.",
	}
)

// synthCatalog expands base to n documents: copy v of a tool gets a server
// name with a tenant and an environment and a description with a scope
// sentence and the tenant's name, so copies differ in name and text.
func synthCatalog(base []Doc, n int) []Doc {
	out := make([]Doc, 0, n)
	for i := 0; len(out) < n; i++ {
		b := base[i%len(base)]
		v := i / len(base)
		if v == 0 {
			out = append(out, b)
			continue
		}
		server, tool := splitName(b.Name)
		tenant := synthTenants[v%len(synthTenants)]
		env := synthEnvs[(v/len(synthTenants))%len(synthEnvs)]
		d := b
		d.Name = fmt.Sprintf("%s-%s-%s%d__%s", server, tenant, env, v, tool)
		d.Description = fmt.Sprintf("%s %s Tenant %s.", b.Description, synthScopes[v%len(synthScopes)], tenant)
		out = append(out, d)
	}
	return out
}

// synthQueries returns n queries cycling through the benchmark queries,
// every other one naming a tenant as users of a large catalog would.
func synthQueries(tb testing.TB, n int) []string {
	qs := loadQueries(tb)
	out := make([]string, n)
	for i := range out {
		q := qs.Queries[i%len(qs.Queries)].Query
		if i%2 == 1 {
			q += " for " + synthTenants[i%len(synthTenants)]
		}
		out[i] = q
	}
	return out
}

func BenchmarkBuild10k(b *testing.B) {
	docs := synthCatalog(loadCatalog(b), synthSize)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Build(docs)
	}
}

func BenchmarkSearch10k(b *testing.B) {
	ix := Build(synthCatalog(loadCatalog(b), synthSize))
	qs := synthQueries(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ix.Search(qs[i%len(qs)], 5)
		i++
	}
}

func BenchmarkSearch10kParallel(b *testing.B) {
	ix := Build(synthCatalog(loadCatalog(b), synthSize))
	qs := synthQueries(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			ix.Search(qs[i%len(qs)], 5)
			i++
		}
	})
}

func BenchmarkSearchSeed10k(b *testing.B) {
	docs := synthCatalog(loadCatalog(b), synthSize)
	qs := synthQueries(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		SearchSeed(docs, qs[i%len(qs)], 5)
		i++
	}
}

// TestScale10k measures, at 10,000 tools, the build time, the heap the
// index holds, and the latency of 1,000 queries (p50, p99, max), and logs
// them. It asserts only what does not depend on the machine's speed: no
// query returns more than max hits.
func TestScale10k(t *testing.T) {
	docs := synthCatalog(loadCatalog(t), synthSize)
	qs := synthQueries(t, 1000)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	ix := Build(docs)
	buildTime := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)

	lat := make([]time.Duration, len(qs))
	for i, q := range qs {
		start := time.Now()
		hits := ix.Search(q, 5)
		lat[i] = time.Since(start)
		if len(hits) > 5 {
			t.Fatalf("query %q: %d hits", q, len(hits))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%d tools: build %v, index heap %.1f MiB (%d terms, %d postings); %d queries: p50 %v, p99 %v, max %v",
		ix.Len(), buildTime.Round(time.Millisecond), float64(heap)/(1<<20), len(ix.vocab), len(ix.postings),
		len(qs), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	runtime.KeepAlive(ix)
	runtime.KeepAlive(docs)
}
