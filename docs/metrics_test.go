package docs

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/audit"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// recorder is a prometheus.Registerer that keeps the name of every metric
// registered on it.
type recorder struct{ names []string }

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for d := range ch {
		m := fqNameRE.FindStringSubmatch(d.String())
		if m == nil {
			return fmt.Errorf("no name in %s", d)
		}
		r.names = append(r.names, m[1])
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// registeredMetrics returns the name of every metric the proxy registers:
// the collectors of package metrics (the store's included) and the audit
// log's counter.
func registeredMetrics(t *testing.T) []string {
	t.Helper()
	r := &recorder{}
	if _, err := metrics.New(r); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.NewBlobStore(r); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.NewStore(r); err != nil {
		t.Fatal(err)
	}
	l, err := audit.New(config.Audit{Path: filepath.Join(t.TempDir(), "audit.log"), MaxBytes: 1 << 20, MaxFiles: 2}, audit.Options{Registerer: r})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(r.names)
	return r.names
}

// undocumentedMetrics returns the names that doc has no table row for
// ("| `name` |").
func undocumentedMetrics(names []string, doc string) []string {
	var missing []string
	for _, n := range names {
		if !strings.Contains(doc, "| `"+n+"` |") {
			missing = append(missing, n)
		}
	}
	return missing
}

// metricNameRE finds a metric's name where Go code defines one:
// Name: "mcp_proxy_…", or a Name… = "mcp_proxy_…" constant.
var metricNameRE = regexp.MustCompile(`Name\w*\s*[:=]\s*"(mcp_proxy_[a-z0-9_]+)"`)

// definedMetrics returns the mcp_proxy_* names the non-test Go code of fsys
// defines, so that a collector registered somewhere registeredMetrics does
// not look shows up.
func definedMetrics(fsys fs.FS) ([]string, error) {
	var names []string
	err := walkFiles(fsys, []string{".go"}, func(name string, data []byte) error {
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		for _, m := range metricNameRE.FindAllStringSubmatch(string(data), -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
		return nil
	})
	slices.Sort(names)
	return names, err
}

// TestMetricsDocumented: every metric the proxy registers has a row in the
// metrics table of docs/operations.md.
func TestMetricsDocumented(t *testing.T) {
	names := registeredMetrics(t)
	defined, err := definedMetrics(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range defined {
		if !slices.Contains(names, n) {
			t.Errorf("%s is defined in the code but not among the metrics this test registers: add its constructor to registeredMetrics", n)
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d metrics registered: %q", len(names), names)
	}
	doc, err := fs.ReadFile(repo, "docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range undocumentedMetrics(names, string(doc)) {
		t.Errorf("metric %s is not in the metrics table of docs/operations.md", n)
	}
}

// TestMetricsCatchBreakage: a metric without a row, or mentioned only in
// prose, is reported; a collector's name is read from its descriptor.
func TestMetricsCatchBreakage(t *testing.T) {
	r := &recorder{}
	r.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_proxy_new_total", Help: "h"}, []string{"server"}))
	if !slices.Equal(r.names, []string{"mcp_proxy_new_total"}) {
		t.Fatalf("recorded %q", r.names)
	}
	names := []string{"mcp_proxy_new_total", "mcp_proxy_upstream_up"}
	doc := "| metric | type |\n|---|---|\n| `mcp_proxy_upstream_up` | gauge |\n\nmcp_proxy_new_total is new.\n"
	if got := undocumentedMetrics(names, doc); !slices.Equal(got, []string{"mcp_proxy_new_total"}) {
		t.Errorf("undocumented %q, want [mcp_proxy_new_total]", got)
	}

	defined, err := definedMetrics(fstestFS(map[string]string{
		"m/m.go":      "package m\n\nvar c = prometheus.NewCounter(prometheus.CounterOpts{\n\tName: \"mcp_proxy_new_total\",\n})\n\nconst NameX = \"mcp_proxy_x\"\n",
		"m/m_test.go": "package m\n\nvar d = prometheus.CounterOpts{Name: \"mcp_proxy_test_only\"}\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(defined, []string{"mcp_proxy_new_total", "mcp_proxy_x"}) {
		t.Errorf("defined %q, want [mcp_proxy_new_total mcp_proxy_x]", defined)
	}
}

// fstestFS is a tree of text files.
func fstestFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return fsys
}
