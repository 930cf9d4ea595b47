package integrity

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// corpusAttack is one tool of testdata/scan/attacks.json.
type corpusAttack struct {
	Rule  string          `json:"rule"`
	About string          `json:"about"`
	Tool  json.RawMessage `json:"tool"`
}

// corpusTool is a tool object and where it comes from.
type corpusTool struct {
	about string
	raw   json.RawMessage
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func attackCorpus(t testing.TB) []corpusAttack {
	var f struct {
		Attacks []corpusAttack `json:"attacks"`
	}
	readJSON(t, "testdata/scan/attacks.json", &f)
	if len(f.Attacks) == 0 {
		t.Fatal("no attacks")
	}
	return f.Attacks
}

// ordinaryCorpus is testdata/scan/ordinary.json and the tool_search
// benchmark's catalog (search/testdata/catalog.json): the tools of the
// real servers the integration tests run (server-everything,
// server-filesystem, server-memory, the Go SDK's examples, ...) as they
// list them, and tools written after well-known servers.
func ordinaryCorpus(t testing.TB) []corpusTool {
	var own struct {
		Tools []struct {
			About string          `json:"about"`
			Tool  json.RawMessage `json:"tool"`
		} `json:"tools"`
	}
	readJSON(t, "testdata/scan/ordinary.json", &own)
	var out []corpusTool
	for _, o := range own.Tools {
		out = append(out, corpusTool{about: o.About, raw: o.Tool})
	}
	var catalog struct {
		Groups []struct {
			Server string            `json:"server"`
			Tools  []json.RawMessage `json:"tools"`
		} `json:"groups"`
	}
	readJSON(t, "../search/testdata/catalog.json", &catalog)
	for _, g := range catalog.Groups {
		for _, raw := range g.Tools {
			out = append(out, corpusTool{about: "catalog " + g.Server, raw: raw})
		}
	}
	if len(out) < 200 {
		t.Fatalf("ordinary corpus has %d tools; the catalog was not read", len(out))
	}
	return out
}

func corpusName(t testing.TB, raw json.RawMessage) string {
	var v struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Name == "" {
		t.Fatalf("tool without a name: %s", raw)
	}
	return v.Name
}

// TestAttackCorpus: under scan: quarantine every attack of the corpus is
// held for the scan, with a quarantine-level finding of the rule it names.
func TestAttackCorpus(t *testing.T) {
	g, _, _ := newGuard(t)
	attacks := attackCorpus(t)
	var tools []Tool
	for _, a := range attacks {
		tools = append(tools, Tool{Name: corpusName(t, a.Tool), Upstream: a.Tool})
	}
	rev := g.Review(serverOf("attacks", Policy{Pinning: PinOff, Scan: ScanQuarantine}, tools...), nil)
	if rev.Err != nil {
		t.Fatal(rev.Err)
	}
	for i, a := range attacks {
		v := &rev.Verdicts[i]
		if !v.Held || len(v.Reasons) != 1 || v.Reasons[0] != ReasonScan {
			t.Errorf("%s (%s): not held for the scan (held %v, reasons %v, findings %+v)", v.Name, a.About, v.Held, v.Reasons, v.Findings)
			continue
		}
		found := false
		for _, f := range v.Findings {
			found = found || f.Rule == a.Rule && f.Level == LevelQuarantine
		}
		if !found {
			t.Errorf("%s (%s): no quarantine-level %s finding: %+v", v.Name, a.About, a.Rule, v.Findings)
		}
	}
}

// TestOrdinaryCorpus: under scan: quarantine no ordinary tool is held, and
// none has a quarantine-level finding.
func TestOrdinaryCorpus(t *testing.T) {
	g, _, _ := newGuard(t)
	ordinary := ordinaryCorpus(t)
	var tools []Tool
	for _, o := range ordinary {
		tools = append(tools, Tool{Name: corpusName(t, o.raw), Upstream: o.raw})
	}
	rev := g.Review(serverOf("ordinary", Policy{Pinning: PinOff, Scan: ScanQuarantine}, tools...), nil)
	if rev.Err != nil {
		t.Fatal(rev.Err)
	}
	for i, o := range ordinary {
		v := &rev.Verdicts[i]
		for _, f := range v.Findings {
			if f.Level == LevelQuarantine {
				t.Errorf("%s (%s): quarantine-level finding %+v", v.Name, o.about, f)
			}
		}
		if v.Held {
			t.Errorf("%s (%s): held (%v)", v.Name, o.about, v.Reasons)
		}
	}
	if n := rev.Held(); n != 0 {
		t.Errorf("%d of %d ordinary tools held", n, len(tools))
	}
}

// TestStripKeepsSchemaValues: scan: strip leaves the values of
// schema keywords alone (an enum member is what the tool accepts), and
// changes only the texts it strips.
func TestStripKeepsSchemaValues(t *testing.T) {
	raw := `{"name":"m","description":"Sets.\u200b","inputSchema":{"type":"object","properties":{"m":{"type":"string","enum":["a\u200bb","c"],"description":"Mode\u200b."}}}}`
	res := scanObject([]byte(raw))
	want := `{"name":"m","description":"Sets.","inputSchema":{"type":"object","properties":{"m":{"type":"string","enum":["a\u200bb","c"],"description":"Mode."}}}}`
	if string(res.stripped) != want {
		t.Fatalf("stripped\n%s\nwant\n%s", res.stripped, want)
	}
	if !strings.Contains(string(res.stripped), `"a\u200bb"`) {
		t.Fatal("enum member changed")
	}
	var where []string
	for _, f := range res.strippedFindings {
		where = append(where, f.Where)
	}
	if len(where) != 1 || where[0] != "inputSchema.properties.m.enum.[0]" {
		t.Fatalf("findings left after strip at %v, want the enum member's", where)
	}
}
