package main

import (
	"bufio"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// machine describes where the numbers come from.
type machine struct {
	NProc          int    `json:"nproc"`
	CPU            string `json:"cpu_model"`
	OS             string `json:"os"`
	GoVersion      string `json:"go_version"`
	ProxyGoVersion string `json:"proxy_go_version"`
}

// report is the whole output.
type report struct {
	Command string    `json:"command"`
	Started string    `json:"started"`
	Machine machine   `json:"machine"`
	N       int       `json:"n"`
	Rounds  int       `json:"rounds"`
	Results []*result `json:"results"`
}

func newReport(o options, argv []string) *report {
	m := machine{NProc: runtime.NumCPU(), CPU: cpuModel(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	if bi, err := buildinfo.ReadFile(o.proxy); err == nil {
		m.ProxyGoVersion = bi.GoVersion
	} else {
		m.ProxyGoVersion = "unknown"
	}
	return &report{Command: shellQuote(argv), Started: time.Now().UTC().Format(time.RFC3339),
		Machine: m, N: o.n, Rounds: o.rounds}
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=,@+%-]+$`)

// shellQuote joins argv into a command line a shell reads back the same.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if shellSafe.MatchString(a) {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// writeTable prints the Markdown report.
func (rep *report) writeTable(w io.Writer) error {
	b := &strings.Builder{}
	m := rep.Machine
	fmt.Fprintf(b, "command: `%s`\n\n", rep.Command)
	fmt.Fprintf(b, "machine: nproc %d, %s, %s, loadtest %s, mcp-proxy built with %s; started %s\n\n",
		m.NProc, m.CPU, m.OS, m.GoVersion, m.ProxyGoVersion, rep.Started)
	cols := []string{sideDirect, sideFloor, sideProxy}
	if rep.hasSide(sidePeer) {
		cols = append(cols, sidePeer)
	}
	if rep.hasSide(sideMemory) {
		cols = append(cols, sideMemory)
	}
	b.WriteString("| scenario | upstream | n |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString(" judged | target | result |\n|---|---|---:|")
	b.WriteString(strings.Repeat("---|", len(cols)))
	b.WriteString("---|---|---|\n")
	var featureRows []*result
	for _, r := range rep.Results {
		if r.isFeatureRow() {
			featureRows = append(featureRows, r)
			continue
		}
		if r.Error != "" {
			fmt.Fprintf(b, "| %s | %s | |%s error: %s | %s | error |\n", r.Scenario, r.Upstream,
				strings.Repeat(" |", len(cols)), cell(r.Error), r.Target)
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %d |", r.Scenario, r.Upstream, r.Sides[sideProxy].N)
		for _, c := range cols {
			b.WriteString(" " + sideCell(r.Sides, c) + " |")
		}
		fmt.Fprintf(b, " %s | %s | %s |\n", r.judgedText(), r.Target, r.Verdict)
	}
	fmt.Fprintf(b, "\nEach side cell: p50 / p99 latency, throughput (requests per second of wall time) and, "+
		"for the process in the proxy's place, its CPU time (user + system, from /proc/<pid>/stat) per request. "+
		"n is requests (cold starts for coldstart-20) per side over %d rounds whose side order rotates; "+
		"latencies are pooled over the rounds. coldstart-20 p50 is the median and p99 the slowest start; "+
		"rss-20x100 latencies are its 8-way calls.\n", rep.Rounds)
	if len(featureRows) > 0 {
		writeFeatureTable(b, featureRows)
	}
	for _, r := range rep.Results {
		if r.Store != nil {
			fmt.Fprintf(b, "\n%s (%s), proxy on Redis: %s\n", r.Scenario, r.Upstream, r.Store.tripsText())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// isFeatureRow reports a row of a feature scenario: its sides are proxies
// compared with the bare one.
func (r *result) isFeatureRow() bool {
	return strings.HasPrefix(r.Scenario, "features-")
}

// featureSideOrder is the order of a feature row's sides.
func featureSideOrder(sides map[string]summary) []string {
	order := []string{sideBare, sideFull}
	for _, f := range allFeatures {
		order = append(order, string(f))
	}
	var out []string
	for _, name := range order {
		if _, ok := sides[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// writeFeatureTable prints the feature scenarios: one line per proxy, its
// numbers and their ratios to the bare proxy's in the same rounds.
func writeFeatureTable(b *strings.Builder, rows []*result) {
	b.WriteString("\nFeature scenarios: every side is mcp-proxy; bare has `pinning: off` and none of " +
		"the features, full has every feature its transport has, a side named after a feature has that one alone. " +
		"Ratios are against bare in the same rounds; sink is the CPU of the side's OTLP sink per request.\n\n")
	b.WriteString("| scenario | upstream | side | n | p50 / p99, throughput, CPU per call | vs bare (p50, thr, CPU) | target | result |\n")
	b.WriteString("|---|---|---|---:|---|---|---|---|\n")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(b, "| %s | %s | | | error: %s | | %s | error |\n", r.Scenario, r.Upstream, cell(r.Error), r.Target)
			continue
		}
		for _, name := range featureSideOrder(r.Sides) {
			s := r.Sides[name]
			c := sideCell(r.Sides, name)
			if s.SinkCPUus != nil {
				c += fmt.Sprintf(" (sink %.0f µs)", *s.SinkCPUus)
			}
			vs, target, verdict := "", "", ""
			if q, ok := r.Ratios[name+"/"+sideBare]; ok {
				vs = fmt.Sprintf("%.2f×, %.2f×, %.2f×", q.P50, q.Thr, q.CPU)
			}
			if name == r.target.judged() {
				target, verdict = r.Target, r.Verdict
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s | %s |\n", r.Scenario, r.Upstream, name, s.N, c, vs, target, verdict)
		}
	}
}

// hasSide reports whether any result measured side.
func (rep *report) hasSide(side string) bool {
	for _, r := range rep.Results {
		if _, ok := r.Sides[side]; ok {
			return true
		}
	}
	return false
}

// sideCell is one side's numbers, or "-" when the row has no such side.
func sideCell(sides map[string]summary, side string) string {
	s, ok := sides[side]
	if !ok {
		return "-"
	}
	out := fmtMs(s.P50ms) + " / " + fmtMs(s.P99ms)
	if s.RPS > 0 {
		out += ", " + fmtRate(s.RPS)
	}
	if s.CPUus != nil {
		out += fmt.Sprintf(", CPU %.0f µs", *s.CPUus)
	}
	if s.PeakRSSMB > 0 {
		out += fmt.Sprintf(", RSS %.1f MB", s.PeakRSSMB)
	}
	return out
}

// judgedText is the judged comparison, then the others worth reading next
// to it (the proxy against the other base, the peer against the same).
func (r *result) judgedText() string {
	t := r.target
	base := t.base
	if base == "" {
		base = sideFloor
		if _, ok := r.Sides[base]; !ok {
			base = sideDirect
		}
	}
	other := map[string]string{sideFloor: sideDirect, sideDirect: sideFloor}[base]
	pick := func(q ratios) float64 {
		if t.measure == "throughput" {
			return q.Thr
		}
		return q.P50
	}
	name := "p50"
	if t.measure == "throughput" {
		name = "thr"
	}
	var out string
	switch t.measure {
	case "rss":
		return fmt.Sprintf("RSS %.1f MB (direct %.1f MB)", r.Sides[sideProxy].PeakRSSMB, r.Sides[sideDirect].PeakRSSMB)
	case "added":
		out = fmt.Sprintf("added %+.2f× %s", r.Value, base)
	default:
		q, ok := r.Ratios[sideProxy+"/"+base]
		if !ok {
			return "-"
		}
		out = fmt.Sprintf("%s %.2f× %s", name, pick(q), base)
	}
	if q, ok := r.Ratios[sideProxy+"/"+other]; ok {
		out += fmt.Sprintf(" (%.2f× %s)", pick(q), other)
	}
	if q, ok := r.Ratios[sidePeer+"/"+base]; ok {
		out += fmt.Sprintf("; peer %.2f× %s", pick(q), base)
	}
	return out
}

func fmtMs(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.3f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

func fmtRate(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f/s", v)
}

// cell keeps an error text inside one table cell.
func cell(s string) string {
	s = strings.NewReplacer("|", "/", "\n", " ").Replace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// writeJSON writes the report as indented JSON.
func (rep *report) writeJSON(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}
