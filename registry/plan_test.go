package registry

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func loadDoc(t *testing.T, name string) *Server {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "server-json", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseEntry(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &e.Server
}

// planCases are the registry's own example documents (one of every package
// type, remotes, URL templates) with the choices a user can make.
var planCases = []struct {
	doc    string
	choice Choice
}{
	{"brave-search", Choice{}},
	{"everything", Choice{}},
	{"knapcode-fixed-args", Choice{}},
	{"knapcode-nuget", Choice{}},
	{"filesystem", Choice{}},
	{"filesystem", Choice{PackageType: "oci"}},
	{"quay-sample", Choice{}},
	{"remote-fs", Choice{}},
	{"weather-pypi", Choice{}},
	{"widget-cargo", Choice{}},
	{"database-manager", Choice{}},
	{"hybrid", Choice{}},
	{"hybrid", Choice{Remote: true}},
	{"hybrid", Choice{PackageType: "pypi"}},
	{"text-editor-mcpb", Choice{}},
	{"snyk-cli", Choice{}},
	{"embedded", Choice{}},
	{"multi-tenant", Choice{}},
	{"events-sse", Choice{}},
	{"configurable-http", Choice{}},
	{"with-package", Choice{}},
	{"with-remote", Choice{}},
	{"remote-fs", Choice{PackageType: "npm"}},
}

// renderPlan is what the golden file shows of a plan: the YAML written and
// the lists the user is shown.
func renderPlan(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "source: %s\n", p.Source)
	for _, l := range p.Block("  ", "  ") {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "flow: %s\n", p.Flow())
	for _, v := range p.Required {
		fmt.Fprintf(&b, "required: %s for %s secret=%v default=%q\n", v.Name, v.For, v.Secret, v.Default)
	}
	for _, v := range p.Optional {
		fmt.Fprintf(&b, "optional: %s for %s default=%q\n", v.Name, v.For, v.Default)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// TestPlanGolden: every example document, with each choice, gives the
// entry in testdata/plans.golden (go test ./registry -run TestPlanGolden
// -update rewrites it), and every entry it writes loads as a config with
// its variables set, in block and in flow style.
func TestPlanGolden(t *testing.T) {
	var out strings.Builder
	for _, tc := range planCases {
		fmt.Fprintf(&out, "== %s %+v\n", tc.doc, tc.choice)
		p, err := PlanServer(loadDoc(t, tc.doc), tc.choice)
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n\n", err)
			continue
		}
		out.WriteString(renderPlan(p) + "\n")
		env := map[string]string{"HOME": "/home/test"}
		for _, v := range p.Required {
			env[v.Name] = "set-" + strings.ToLower(v.Name)
		}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		for style, doc := range map[string]string{
			"block": "servers:\n" + strings.Join(p.Block("  ", "  "), "\n") + "\n",
			"flow":  "servers: {" + p.Flow() + "}\n",
		} {
			if _, err := config.Parse([]byte(doc), lookup); err != nil {
				t.Errorf("%s %+v: the %s entry does not load: %v\n%s", tc.doc, tc.choice, style, err, doc)
			}
		}
		block := strings.Join(p.Block("  ", "  "), "\n")
		for _, v := range p.Required {
			if !strings.Contains(block, "${"+v.Name+"}") {
				t.Errorf("%s %+v: %s is listed as required but not referenced", tc.doc, tc.choice, v.Name)
			}
		}
		// Without its variables the entry must not load: every one is
		// referenced.
		if len(p.Required) > 0 {
			doc := "servers:\n" + strings.Join(p.Block("  ", "  "), "\n") + "\n"
			if _, err := config.Parse([]byte(doc), func(k string) (string, bool) { return "/home/test", k == "HOME" }); err == nil {
				t.Errorf("%s: loads with none of its variables set", tc.doc)
			}
		}
	}
	golden := filepath.Join("testdata", "plans.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("plans differ from %s (run with -update and review the diff):\n%s", golden, out.String())
	}
}

// TestOCIImage: the image reference run is the identifier, tagged with the
// version when it has neither tag nor digest, kept by digest when it has
// one, and with the registry's host in front when it names none.
func TestOCIImage(t *testing.T) {
	for _, tc := range []struct {
		p    Package
		want string
	}{
		{Package{Identifier: "mcp/filesystem", Version: "1.0.2"}, "mcp/filesystem:1.0.2"},
		{Package{Identifier: "docker.io/mcp/filesystem:1.0.2", Version: "1.0.2"}, "docker.io/mcp/filesystem:1.0.2"},
		{Package{Identifier: "ghcr.io/o/s@sha256:" + strings.Repeat("a", 64), Version: "2"}, "ghcr.io/o/s@sha256:" + strings.Repeat("a", 64)},
		{Package{Identifier: "o/s", Version: "3", RegistryBaseURL: "https://ghcr.io"}, "ghcr.io/o/s:3"},
		{Package{Identifier: "quay.io/o/s:1", RegistryBaseURL: "https://ghcr.io"}, "quay.io/o/s:1"},
		{Package{Identifier: "o/s:4", RegistryBaseURL: "https://docker.io"}, "o/s:4"},
	} {
		if got := ociImage(&tc.p); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.p, got, tc.want)
		}
	}
}
