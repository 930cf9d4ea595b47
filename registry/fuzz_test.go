package registry

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// FuzzParseEntry: any registry response either fails to parse with
// ErrBadResponse or gives a server whose every plan renders an entry that
// parses as YAML and never expands a variable it did not list.
func FuzzParseEntry(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "server-json", "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"server": {"name": "a.b/c", "remotes": [{"type": "sse", "url": "https://x/{a}${B}"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEntry(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), ErrBadResponse.Error()) {
				t.Fatalf("error without the sentinel's words: %v", err)
			}
			return
		}
		for _, choice := range []Choice{{}, {Remote: true}} {
			p, err := PlanServer(&e.Server, choice)
			if err != nil {
				continue
			}
			listed := map[string]bool{"HOME": true}
			for _, v := range p.Required {
				listed[v.Name] = true
			}
			doc := "servers:\n" + strings.Join(p.Block("  ", "  "), "\n") + "\n"
			// Every variable the entry references is one it listed.
			for _, m := range refPattern.FindAllStringSubmatch(strings.ReplaceAll(doc, "$${", ""), -1) {
				if !listed[m[1]] {
					t.Fatalf("entry references unlisted variable %s:\n%s", m[1], doc)
				}
			}
			for name := range listed {
				if name != "HOME" && !strings.Contains(doc, "${"+name+"}") {
					t.Fatalf("required %s is not referenced:\n%s", name, doc)
				}
			}
			_, err = config.Parse([]byte(doc), func(string) (string, bool) { return "/x", true })
			if err != nil && strings.Contains(err.Error(), "invalid YAML") {
				t.Fatalf("entry is not valid YAML: %v\n%s", err, doc)
			}
		}
	})
}

var refPattern = regexp.MustCompile(`\$\{([^}]*)\}`)

// FuzzParsePage: a list page parses or fails with ErrBadResponse.
func FuzzParsePage(f *testing.F) {
	f.Add([]byte(`{"servers": [{"server": {"name": "a.b/c", "version": "1"}, "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deprecated"}}}], "metadata": {"nextCursor": "x"}}`))
	f.Add([]byte(`{"servers": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePage(data)
		if err != nil {
			if !strings.Contains(err.Error(), ErrBadResponse.Error()) {
				t.Fatalf("error without the sentinel's words: %v", err)
			}
			return
		}
		for _, e := range p.Servers {
			if !ValidName(e.Server.Name) {
				t.Fatalf("accepted invalid name %q", e.Server.Name)
			}
		}
	})
}
