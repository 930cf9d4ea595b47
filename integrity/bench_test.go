package integrity

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// benchTools is a catalog-build-sized batch: n tools shaped like real ones
// (a two-sentence description, three parameters with descriptions, an
// enum, annotations), about 700 bytes each.
func benchTools(n int) []Tool {
	verbs := []string{"Create", "Read", "Update", "Delete", "List", "Search", "Archive", "Export"}
	nouns := []string{"issue", "file", "message", "record", "branch", "ticket", "document", "event"}
	out := make([]Tool, n)
	for i := range out {
		v, o := verbs[i%len(verbs)], nouns[(i/len(verbs))%len(nouns)]
		name := fmt.Sprintf("%s_%s_%04d", v, o, i)
		desc := fmt.Sprintf("%s a %s in the workspace. Returns the %s as JSON with its id, title and timestamps; "+
			"fails when the caller lacks permission or the %s does not exist.", v, o, o, o)
		raw := fmt.Sprintf(`{"name":%s,"title":%s,"description":%s,"inputSchema":{"type":"object","properties":{`+
			`"id":{"type":"string","description":"Identifier of the %s, as returned by list."},`+
			`"limit":{"type":"integer","minimum":1,"maximum":100,"default":20,"description":"Maximum number of results."},`+
			`"format":{"type":"string","enum":["json","markdown","text"],"description":"Output format of the result."}},`+
			`"required":["id"]},"annotations":{"readOnlyHint":%t,"openWorldHint":false}}`,
			rawjson.String(name), rawjson.String(v+" "+o), rawjson.String(desc), o, v == "Read" || v == "List" || v == "Search")
		out[i] = Tool{Name: name, Upstream: json.RawMessage(raw)}
	}
	return out
}

// BenchmarkFingerprint2000 is the fingerprint part of a first catalog
// build with 2,000 tools: canonical JSON and SHA-256.
func BenchmarkFingerprint2000(b *testing.B) {
	tools := benchTools(2000)
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range tools {
			if _, fp, _ := fingerprintTool(t.Name, t.Upstream, ""); fp == "" {
				b.Fatal("no fingerprint")
			}
		}
	}
}

// BenchmarkScan2000 is the description scan of a first catalog build with
// 2,000 tools.
func BenchmarkScan2000(b *testing.B) {
	tools := benchTools(2000)
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range tools {
			if res := scanObject(t.Upstream); len(res.findings) != 0 {
				b.Fatalf("findings on a clean tool: %v", res.findings)
			}
		}
	}
}

// BenchmarkScanCorpus is the description scan of the ordinary corpus
// (testdata/scan/ordinary.json and the tool_search benchmark's catalog):
// real servers' tools, and descriptions in other scripts, with schema
// values, links and base64, which take the scan's slower paths.
func BenchmarkScanCorpus(b *testing.B) {
	corpus := ordinaryCorpus(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range corpus {
			scanObject(c.raw)
		}
	}
}

// BenchmarkCheckPins2000 is what a proxy with 2,000 pinned tools (20
// servers of 100) does before it starts serving: read and verify every
// pin file (Store.Check).
func BenchmarkCheckPins2000(b *testing.B) {
	tools := benchTools(2000)
	dir := b.TempDir()
	g, err := Open(Options{StateDir: dir}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var servers []string
	for s := 0; s < 20; s++ {
		name := fmt.Sprintf("s%d", s)
		servers = append(servers, name)
		if rev := g.Review(Server{Name: name, Policy: quarantine, Tools: tools[s*100 : (s+1)*100]}, nil); rev.Err != nil {
			b.Fatal(rev.Err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := NewStore(dir).Check(servers); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReviewFirstSight2000 is a first catalog build of 2,000 tools
// spread over 10 servers: fingerprints, scan, cross-server index, and
// the pin files written (fsync included).
func BenchmarkReviewFirstSight2000(b *testing.B) {
	tools := benchTools(2000)
	var peerTools []PeerTool
	for i, t := range tools {
		s := fmt.Sprintf("s%d", i%10)
		peerTools = append(peerTools, PeerTool{Server: s, Name: t.Name, Exposed: s + "__" + t.Name})
	}
	b.ReportAllocs()
	for b.Loop() {
		g, err := Open(Options{StateDir: b.TempDir()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		peers := NewPeers(peerTools)
		for s := 0; s < 10; s++ {
			var in []Tool
			for i := s; i < len(tools); i += 10 {
				in = append(in, tools[i])
			}
			if rev := g.Review(Server{Name: fmt.Sprintf("s%d", s), Policy: quarantine, Tools: in}, peers); rev.Err != nil {
				b.Fatal(rev.Err)
			}
		}
	}
}

// BenchmarkReviewUnchanged2000 is a rebuild in which nothing changed (one
// server's list_changed, or a reconnect): every server reviewed again with
// the same bytes.
func BenchmarkReviewUnchanged2000(b *testing.B) {
	tools := benchTools(2000)
	g, _ := Open(Options{StateDir: b.TempDir()}, nil)
	var peerTools []PeerTool
	inputs := make([]Server, 10)
	for s := range inputs {
		inputs[s] = Server{Name: fmt.Sprintf("s%d", s), Policy: quarantine}
	}
	for i, t := range tools {
		inputs[i%10].Tools = append(inputs[i%10].Tools, t)
		peerTools = append(peerTools, PeerTool{Server: inputs[i%10].Name, Name: t.Name, Exposed: inputs[i%10].Name + "__" + t.Name})
	}
	peers := NewPeers(peerTools)
	for _, in := range inputs {
		g.Review(in, peers)
	}
	b.ReportAllocs()
	for b.Loop() {
		peers := NewPeers(peerTools)
		for _, in := range inputs {
			if g.Review(in, peers).Held() != 0 {
				b.Fatal("held")
			}
		}
	}
}

// BenchmarkCanonicalizeDeep is a hostile tool object: a 1 MiB string at
// the bottom of 9,999 nested objects. Its cost must stay linear in its
// size (a parser that writes each object again when it closes took 6 s
// here).
func BenchmarkCanonicalizeDeep(b *testing.B) {
	raw := []byte(`{"name":"x","inputSchema":` + strings.Repeat(`{"a":`, 9999) + `"` +
		strings.Repeat("x", 1<<20) + `"` + strings.Repeat("}", 10000))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Canonicalize(raw); err != nil {
			b.Fatal(err)
		}
	}
}
