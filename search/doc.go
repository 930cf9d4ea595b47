// Package search is the ranking index behind the proxy's tool_search tool in
// deferred mode (docs/deferred-loading.md), and the seed's output format for its results.
//
// Build indexes the tools one agent may call; Search ranks them against the
// model's keywords. The index is immutable after Build and safe for
// concurrent searches; a catalog change means a new Build.
//
// # Ranking
//
// BM25F over five fields of each tool, each with its own weight and length
// normalization: the words of the tool part of its exposed name, the words of
// its server (prefix) part, its description, its parameter names, and its
// parameter descriptions and enum values (input schema properties, two levels
// deep, bounded). Names are split at '_', '-', '.', "__", camelCase and
// letter/digit boundaries; words are lowercased, stop words dropped, stemmed
// by a small suffix stripper, and a few abbreviations expanded ("repo",
// "pr", "dir"/"folder", ...) on both sides. A query also matches related
// words ("remove" for "delete", "show" for "list") at half weight, longer
// index words it is a prefix of at 0.3, and, for an identifier-like word
// ("read_file", "github__create_issue"), a tool's whole name. Ties are
// broken by name, so the order of results depends only on the set of tools
// and the query, never on input order or timing.
//
// On the benchmark in testdata (193 tools captured from real MCP servers or
// written after well-known ones, 147 user queries) the expected tool is in
// the top 5 for 92.5% of queries, against 67% for the seed's scoring (count
// of query words found as substrings of "name description"). docs/deferred-loading.md has
// the figures, the scale measurements and the commands.
//
// # Output
//
// Format, FormatSelect, ParseSelect, DeferredList and the texts QueryRequired
// and NoMatches reproduce what the seed's tool_search printed, with valid
// JSON inside each <function> element.
package search
