package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const dashboardPath = "../deploy/grafana/mcp-proxy.json"

// dashboardQueries returns every PromQL expression of the dashboard: the
// panels' targets and the first argument of the template variables'
// label_values(...) queries.
func dashboardQueries(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			t.Fatalf("template variable query %s", v.Query)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("template variable query %q is not label_values(<selector>, <label>)", q.Query)
		}
		out = append(out, m[1])
	}
	return out
}

// promSelector is one metric selector of a PromQL expression: the metric
// name and the label names its matchers use.
type promSelector struct {
	metric string
	labels []string
}

// promKeywords are the identifiers of PromQL that are neither metrics nor
// functions (functions are told apart by the "(" after them).
var promKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
}

// promSelectors tokenizes a PromQL expression just enough to find its
// metric selectors: strings, durations in [...] and Grafana's $variables
// are skipped, an identifier followed by "(" is a function, the label
// lists after by/without/on/ignoring/group_* are skipped, and an
// identifier's {...} matchers give its label names.
func promSelectors(expr string) ([]promSelector, error) {
	var out []promSelector
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && strings.IndexByte(" \t\n\r", expr[i]) >= 0 {
			i++
		}
		return i
	}
	// matchers reads {...} at i and returns the label names and the end.
	matchers := func(i int) ([]string, int, error) {
		var labels []string
		i++ // '{'
		for {
			i = skipSpace(i)
			if i >= len(expr) {
				return nil, i, io.ErrUnexpectedEOF
			}
			if expr[i] == '}' {
				return labels, i + 1, nil
			}
			if expr[i] == ',' {
				i++
				continue
			}
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			if j == i {
				return nil, i, io.ErrUnexpectedEOF
			}
			labels = append(labels, expr[i:j])
			for j < len(expr) && expr[j] != '"' && expr[j] != '\'' && expr[j] != '`' {
				j++
			}
			end, err := skipString(expr, j)
			if err != nil {
				return nil, j, err
			}
			i = end
		}
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, io.ErrUnexpectedEOF
			}
			i += end + 1
		case c == '$':
			i++
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case c == '{': // a selector without a metric name
			_, end, err := matchers(i)
			if err != nil {
				return nil, err
			}
			i = end
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := skipSpace(j)
			// An aggregation may put its by/without clause first:
			// sum by (a) (x). Look past it for the "(".
			if after := afterGrouping(expr, k); after > k && after < len(expr) && expr[after] == '(' && !promKeywords[strings.ToLower(word)] {
				k = after
			}
			switch {
			case promKeywords[strings.ToLower(word)]:
				if k < len(expr) && expr[k] == '(' { // a label list
					end := strings.IndexByte(expr[k:], ')')
					if end < 0 {
						return nil, io.ErrUnexpectedEOF
					}
					j = k + end + 1
				}
			case k < len(expr) && expr[k] == '(': // a function or an aggregation
			default:
				sel := promSelector{metric: word}
				if k < len(expr) && expr[k] == '{' {
					labels, end, err := matchers(k)
					if err != nil {
						return nil, err
					}
					sel.labels, j = labels, end
				}
				out = append(out, sel)
			}
			i = j
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++ // a number (or a duration after offset)
			}
		default:
			i++
		}
	}
	return out, nil
}

// afterGrouping returns the position after a "by (...)" or "without
// (...)" clause at i (and the space after it), or i when there is none.
func afterGrouping(expr string, i int) int {
	for _, kw := range []string{"by", "without"} {
		if !strings.HasPrefix(strings.ToLower(expr[i:]), kw) {
			continue
		}
		j := i + len(kw)
		for j < len(expr) && (expr[j] == ' ' || expr[j] == '\t') {
			j++
		}
		if j >= len(expr) || expr[j] != '(' {
			return i
		}
		end := strings.IndexByte(expr[j:], ')')
		if end < 0 {
			return i
		}
		j += end + 1
		for j < len(expr) && (expr[j] == ' ' || expr[j] == '\t') {
			j++
		}
		return j
	}
	return i
}

// skipString returns the end of the quoted string at i.
func skipString(s string, i int) (int, error) {
	if i >= len(s) {
		return i, io.ErrUnexpectedEOF
	}
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return i, io.ErrUnexpectedEOF
}

func TestPromSelectors(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{`histogram_quantile(0.95, sum by (server, le) (rate(mcp_proxy_x_bucket{job=~"$job", outcome!="a}b"}[$__rate_interval])))`, `mcp_proxy_x_bucket{job,outcome}`},
		{`sum by (a) (rate(m1[5m])) / on (a) group_left (b) sum without (c) (m2{d="x"} offset 1h) > bool 0.5`, `m1{} m2{d}`},
		{`up and ignoring (x) m3 or vector(1)`, `up{} m3{}`},
		{`{__name__="x"}`, ``},
	}
	for _, tt := range tests {
		sels, err := promSelectors(tt.expr)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		var got []string
		for _, s := range sels {
			got = append(got, s.metric+"{"+strings.Join(s.labels, ",")+"}")
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("promSelectors(%s) = %q, want %q", tt.expr, got, tt.want)
		}
	}
	if _, err := promSelectors(`sum(rate(x{a="b}[5m]))`); err == nil {
		t.Error("an unterminated string parsed")
	}
}

// scrape reads a Prometheus text page: every sample's metric name and the
// label names it was seen with.
func scrape(t testing.TB, url string) map[string]map[string]bool {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t, callTimeout), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	labelName := regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="`)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name := line[:end]
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		if line[end] == '{' {
			close := strings.LastIndexByte(line, '}')
			for _, m := range labelName.FindAllStringSubmatch(line[end:close+1], -1) {
				out[name][m[1]] = true
			}
		}
	}
	return out
}

// TestDashboardMetricsExist starts the real binary with metrics and the
// audit log on, makes calls that are allowed, fail, are denied and need an
// approval the client cannot give, scrapes /metrics, and checks that every
// metric the Grafana dashboard queries is exported, with every label its
// matchers name (job and instance come from the scrape itself).
func TestDashboardMetricsExist(t *testing.T) {
	fx := fixtureServer("fx", nil)
	auditPath := filepath.Join(t.TempDir(), "audit", "audit.log")
	cfg := writeConfig(t, `metrics: {listen: "127.0.0.1:0"}
audit: {path: `+q(auditPath)+`}
bundles: {all: {servers: [fx]}}
agents:
  ops:
    mcp_bundles: [all]
    excluded_tools: [fx__sleep]
    autonomy: supervised
    auto_approve: [fx__echo, fx__tool_error]
    always_ask: [fx__record]
default_agent: ops
`, fx)
	c := startStdioRaw(t, "mcp-proxy", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)
	metricsURL := sfMetricsURL(t, c.p.stderr)
	rawResult(t, c, "tools/call", `{"name":"fx__echo","arguments":{"text":"a"}}`)
	rawResult(t, c, "tools/call", `{"name":"fx__tool_error","arguments":{}}`)
	for _, name := range []string{"fx__sleep", "fx__record"} { // denied; approval unsupported
		if r := rawResult(t, c, "tools/call", `{"name":"`+name+`","arguments":{}}`); !strings.Contains(string(r), `"isError":true`) {
			t.Fatalf("%s: %s; want a refusal", name, r)
		}
	}
	got := scrape(t, metricsURL)

	queries := dashboardQueries(t)
	seen := map[string]bool{}
	for _, q := range queries {
		sels, err := promSelectors(q)
		if err != nil {
			t.Errorf("query %q: %v", q, err)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("query %q names no metric", q)
		}
		for _, s := range sels {
			seen[s.metric] = true
			labels, ok := got[s.metric]
			if !ok {
				t.Errorf("query %q: metric %s is not on /metrics", q, s.metric)
				continue
			}
			for _, l := range s.labels {
				if !labels[l] && l != "job" && l != "instance" {
					t.Errorf("query %q: %s has no label %s (it has %v)", q, s.metric, l, keys(labels))
				}
			}
		}
	}
	// The dashboard shows what the issue asks for.
	for _, m := range []string{"mcp_proxy_tool_calls_total", "mcp_proxy_tool_call_duration_seconds_bucket", "mcp_proxy_upstream_up",
		"mcp_proxy_sessions_active", "mcp_proxy_policy_denials_total", "mcp_proxy_approvals_total", "mcp_proxy_audit_dropped_total"} {
		if !seen[m] {
			t.Errorf("the dashboard queries no %s", m)
		}
	}
	if t.Failed() {
		t.Logf("metrics on /metrics: %v", keys(got))
	}
	if st, err := os.Stat(auditPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("audit log %v, %v; want a 0600 file created at start", st, err)
	}
	_ = c.in.Close() // the proxy writes its audit queue at shutdown
	if err := c.p.wait(t, exitTimeout); err != nil {
		t.Fatalf("proxy exit: %v", err)
	}
	for _, l := range auditLines(t, auditPath) {
		if l["agent"] != "ops" {
			t.Errorf("audit line of agent %v, want ops", l["agent"])
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return slices.Clip(out)
}
