package metrics

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// exposition is the lines of the text exposition Handler serves of reg
// that belong to the metrics named in names.
func exposition(t *testing.T, reg *prometheus.Registry, names ...string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	Handler(reg).ServeHTTP(rec, req)
	var b strings.Builder
	for line := range strings.Lines(rec.Body.String()) {
		for _, n := range names {
			if strings.Contains(line, n) {
				b.WriteString(line)
				break
			}
		}
	}
	return b.String()
}

// TestCachedSeriesExposition records the same calls and requests through
// the cached series (ToolSeries, the counters' cache) and straight on the
// collectors, and checks that the two expositions are the same bytes: the
// same series, none created ahead of a call, the same values.
func TestCachedSeriesExposition(t *testing.T) {
	cachedReg, directReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	cached, err := New(cachedReg)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := New(directReg)
	if err != nil {
		t.Fatal(err)
	}
	read, write, unused := new(ToolSeries), new(ToolSeries), new(ToolSeries)
	_ = unused // a tool never called: no series
	calls := []struct {
		ts           *ToolSeries
		server, tool string
		outcome      string
		d            time.Duration
	}{
		{read, "fs", "read_file", OutcomeOK, 3 * time.Millisecond},
		{read, "fs", "read_file", OutcomeOK, 40 * time.Millisecond},
		{read, "fs", "read_file", OutcomeTimeout, 30 * time.Second},
		{write, "fs", "write_file", OutcomeDenied, 0},
		{write, "fs", "write_file", OutcomeToolError, 2 * time.Second},
		{write, "fs", "write_file", "not_an_outcome", time.Millisecond},
		{read, "fs", "read_file", OutcomeOK, 7 * time.Millisecond},
		{write, "fs", "write_file", OutcomeOK, 9 * time.Millisecond},
		{write, "fs", "write_file", "not_an_outcome", time.Millisecond},
	}
	for _, c := range calls {
		cached.ToolCallOf(c.ts, c.server, c.tool, c.outcome, c.d)
		direct.toolCalls.WithLabelValues(c.server, c.tool, c.outcome).Inc()
		direct.toolCallDuration.WithLabelValues(c.server, c.outcome).Observe(c.d.Seconds())
	}
	reqs := [][3]string{
		{"eng", "tools/call", "ok"}, {"eng", "tools/call", "ok"}, {"eng", "tools/list", "error"},
		{"", "ping", "ok"}, {"ops", "tools/call", "ok"}, {"eng", "tools/call", "error"},
	}
	for _, r := range reqs {
		cached.Request(r[0], r[1], r[2])
		direct.counters[requests].WithLabelValues(r[0], r[1], r[2]).Inc()
		cached.Auth(r[0], r[2])
		direct.counters[auth].WithLabelValues(r[0], r[2]).Inc()
	}
	names := []string{NameToolCalls, NameToolCallDuration, "mcp_proxy_requests_total", "mcp_proxy_auth_total"}
	got, want := exposition(t, cachedReg, names...), exposition(t, directReg, names...)
	if got != want {
		t.Errorf("cached exposition:\n%s\nwant:\n%s", got, want)
	}
	if want == "" {
		t.Fatal("nothing exposed")
	}
}

// TestToolSeriesAcrossMetrics passes one ToolSeries to two Metrics (a test
// building its own, say): each records on its own collectors.
func TestToolSeriesAcrossMetrics(t *testing.T) {
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, err := New(regA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(regB)
	if err != nil {
		t.Fatal(err)
	}
	ts := new(ToolSeries)
	a.ToolCallOf(ts, "fs", "read_file", OutcomeOK, time.Millisecond)
	b.ToolCallOf(ts, "fs", "read_file", OutcomeOK, time.Millisecond)
	b.ToolCallOf(ts, "fs", "read_file", OutcomeOK, time.Millisecond)
	for reg, want := range map[*prometheus.Registry]string{regA: "1", regB: "2"} {
		line := `mcp_proxy_tool_calls_total{outcome="ok",server="fs",tool="read_file"} ` + want + "\n"
		if got := exposition(t, reg, NameToolCalls); !bytes.Contains([]byte(got), []byte(line)) {
			t.Errorf("exposition:\n%s\nwant the line %q", got, line)
		}
	}
}

// TestCountConcurrentSeries counts on new and known series from several
// goroutines at once: every series ends with every count made on it.
func TestCountConcurrentSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	const workers, agents, rounds = 4, 20, 5
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for r := range rounds {
				for a := range agents {
					agent := "agent" + strconv.Itoa((a+w+r)%agents)
					m.Request(agent, "tools/call", "ok")
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	got := exposition(t, reg, "mcp_proxy_requests_total{")
	for a := range agents {
		line := `mcp_proxy_requests_total{agent="agent` + strconv.Itoa(a) + `",method="tools/call",outcome="ok"} ` +
			strconv.Itoa(workers*rounds) + "\n"
		if !strings.Contains(got, line) {
			t.Errorf("exposition:\n%s\nwant the line %q", got, line)
		}
	}
}
