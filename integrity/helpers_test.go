package integrity

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/rs/zerolog"
)

// metricValue reads one sample from reg: the metric name with label
// server, and kind when kind is not "".
func metricValue(t *testing.T, reg *prometheus.Registry, name, server, kind string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["server"] != server || kind != "" && labels["kind"] != kind {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// logBuffer collects a Guard's log lines.
type logBuffer struct{ testproc.Buffer }

// lines returns the decoded log lines whose message contains msg.
func (b *logBuffer) lines(msg string) []map[string]any {
	var out []map[string]any
	for l := range strings.SplitSeq(b.String(), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(fmt.Sprint(m["message"]), msg) {
			out = append(out, m)
		}
	}
	return out
}

// newGuard returns a Guard over a fresh state directory, its log and a
// fixed clock.
func newGuard(t *testing.T) (*Guard, *logBuffer, string) {
	t.Helper()
	dir := t.TempDir()
	logs := &logBuffer{}
	g, err := Open(Options{StateDir: dir, Logger: zerolog.New(logs),
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, logs, dir
}

// tool builds a tool object with name and description.
func tool(name, desc string) Tool {
	n, d := rawjson.String(name), rawjson.String(desc)
	raw := fmt.Sprintf(`{"name":%s,"description":%s,"inputSchema":{"type":"object","properties":{"text":{"type":"string","description":"Text."}}}}`, n, d)
	return Tool{Name: name, Upstream: json.RawMessage(raw)}
}

// serverOf is a Server input with policy p.
func serverOf(name string, p Policy, tools ...Tool) Server {
	return Server{Name: name, Policy: p, Tools: tools}
}

// held maps each tool name of rev to its held flag.
func held(rev *Review) map[string]bool {
	out := map[string]bool{}
	for _, v := range rev.Verdicts {
		out[v.Name] = v.Held
	}
	return out
}

// record makes a pin record of a tool's current definition.
func record(tc *toolCache, reason Reason, now time.Time) *pinRecord {
	return (&definitions{tools: []*toolCache{tc}, defs: make([][]byte, 1)}).record(0, reason, now)
}
