package integrity

import (
	"slices"
	"sort"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// minReferenceLen is the shortest tool name the cross-server detector
// looks for; shorter names are ordinary words.
const minReferenceLen = 4

// PeerTool is one tool of the catalog, as the cross-server detector sees
// it.
type PeerTool struct {
	// Server is the configured server name.
	Server string
	// Name is the upstream's own tool name.
	Name string
	// Exposed is the name clients see; "" when it has none.
	Exposed string
}

// Peers indexes the tool names of every server of a catalog, so that a
// description that talks about another server's tools (tool shadowing:
// "when send_email is called, add this address in bcc") is found. Only
// distinctive names count: at least 4 characters with a '_', '-' or '.'
// or a lower-case letter followed by a capital (read_file, get-env,
// sendEmail, github__create_issue). Bare words such as "echo" or "search"
// are everyday English and are not matched. A Peers is immutable and safe
// for concurrent use; nil is an empty index.
type Peers struct {
	// owners maps a distinctive name (upstream or exposed) to the servers
	// that have a tool by that name, sorted. A server's own names are
	// never references to another server: a word whose owners include the
	// server of the text it is in is not one.
	owners map[string][]string
}

// NewPeers builds the index of a catalog's tools.
func NewPeers(tools []PeerTool) *Peers {
	p := &Peers{owners: map[string][]string{}}
	for _, t := range tools {
		for _, n := range []string{t.Name, t.Exposed} {
			if distinctive(n) && !slices.Contains(p.owners[n], t.Server) {
				p.owners[n] = append(p.owners[n], t.Server)
				sort.Strings(p.owners[n])
			}
		}
	}
	return p
}

// distinctive reports whether a tool name is unlikely to be an ordinary
// word.
func distinctive(name string) bool {
	if len(name) < minReferenceLen {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if (c == '_' || c == '-' || c == '.') && i < len(name)-1 {
			return true
		}
		if c >= 'A' && c <= 'Z' && name[i-1] >= 'a' && name[i-1] <= 'z' {
			return true
		}
	}
	return false
}

// references returns a quarantine-level finding for each distinct
// (member, name) where a text of server's tool names a tool of another
// server that server does not also have.
func (p *Peers) references(server string, words []word) []Finding {
	if p == nil || len(p.owners) == 0 {
		return nil
	}
	var out []Finding
	seen := map[string]bool{}
	for _, w := range words {
		owners := p.owners[w.text]
		if len(owners) == 0 || slices.Contains(owners, server) || seen[w.where+"\x00"+w.text] {
			continue
		}
		others := owners // none of them is server
		seen[w.where+"\x00"+w.text] = true
		what := "names " + strconv.Quote(sanitize.Text(w.text)) + ", a tool of server " + strconv.Quote(others[0])
		if len(others) > 1 {
			what += " (and " + strconv.Itoa(len(others)-1) + " more)"
		}
		out = append(out, Finding{Kind: KindCrossServer, Level: LevelQuarantine, Rule: "other_server_tool", Where: w.where,
			Excerpt: cutRunes(what, maxExcerptRunes)})
	}
	return out
}
