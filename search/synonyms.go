package search

// stopWords are dropped from documents and queries: function words, the
// words people wrap requests in ("please show me what ...", "can you"), and
// "mcp"/"tool", which every tool catalog repeats. Lowercase, before stemming.
var stopWords = toSet(
	"a", "an", "the", "and", "or", "but", "nor", "if", "then", "than", "so", "of", "to", "in",
	"on", "at", "by", "for", "with", "from", "as", "into", "onto", "about", "over", "up", "out",
	"is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "done", "has",
	"have", "had", "having", "it", "its", "this", "that", "these", "those", "there", "here",
	"i", "me", "my", "mine", "we", "us", "our", "you", "your", "he", "she", "his", "her", "they",
	"them", "their", "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
	"can", "could", "would", "should", "will", "shall", "may", "might", "must", "let", "lets",
	"please", "want", "need", "like", "just", "also", "too", "very", "some", "any", "all",
	"every", "everything", "anything", "something", "each", "both", "either", "such", "own", "same", "other", "no", "not", "only",
	"now", "yet", "still", "again", "give", "tell", "ll", "re", "ve", "don", "doesn", "isn",
	"via", "per", "mcp", "tool", "tools",
)

// canonical expands abbreviations to the words they stand for, in documents
// and queries alike, so "repo" in a query meets "repository" in a
// description and the other way round. The table is kept small: every entry
// is an abbreviation that tool descriptions and users both use, whose meaning
// is unambiguous in a tool catalog. Keys and values are words; init stems
// them.
var canonicalWords = map[string][]string{
	"repo":     {"repository"}, // GitHub/GitLab tools say "repository", users say "repo"
	"dir":      {"directory"},  // "dir"/"folder" vs the filesystem tools' "directory"
	"folder":   {"directory"},
	"pr":       {"pull", "request"}, // GitHub's own abbreviation
	"prs":      {"pull", "request"},
	"mr":       {"merge", "request"}, // GitLab's
	"mrs":      {"merge", "request"},
	"db":       {"database"},
	"env":      {"environment"},
	"config":   {"configuration"},
	"cfg":      {"configuration"},
	"info":     {"information"},
	"msg":      {"message"},
	"k8s":      {"kubernetes"},
	"js":       {"javascript"},
	"timezone": {"time", "zone"}, // one word or two, both spellings are common
	"tz":       {"time", "zone"},
}

// relatedGroups are words a user may say for what a tool description says
// with another word of the group. They widen queries only (a document keeps
// its own words) and at relatedWeight, so an exact word still ranks first.
// Each group is a pair of everyday verbs or nouns that tool descriptions use
// interchangeably for one operation.
var relatedGroups = [][]string{
	{"delete", "remove", "erase", "drop"}, // destructive verbs
	{"create", "add", "new", "make"},      // "make a folder", "add an issue"
	{"list", "show", "enumerate"},         // "show me the channels" = list
	{"get", "fetch", "retrieve"},          // read one thing
	{"search", "find", "lookup", "look"},  // "look up", "find" = search
	{"update", "edit", "modify", "change"},
	{"send", "post"},
	{"write", "save", "store"},
	{"image", "picture", "photo", "pic"},
	{"run", "execute"},
	{"issue", "ticket", "bug"}, // trackers name the same thing differently
	{"start", "begin"},
	{"remember", "memory"},
}

// relatedWeight is the query weight of a related word, relative to 1 for the
// words of the query itself.
const relatedWeight = 0.5

var (
	canonical map[string][]string // stem -> stems it expands to
	related   map[string][]string // stem -> stems of its related words
)

func init() {
	canonical = make(map[string][]string, len(canonicalWords))
	for k, vs := range canonicalWords {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = stem(v)
		}
		canonical[stem(k)] = out
	}
	related = make(map[string][]string)
	for _, g := range relatedGroups {
		stems := make([]string, 0, len(g))
		for _, w := range g {
			normalize(w, func(t string) { stems = append(stems, t) })
		}
		for _, s := range stems {
			for _, o := range stems {
				if o != s {
					related[s] = append(related[s], o)
				}
			}
		}
	}
}

func toSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}
