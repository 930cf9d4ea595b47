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

// target is a scenario's performance goal (from the issues). The zero
// target means none: the ratio is reported without a verdict.
type target struct {
	// measure is what is judged: "p50" (proxy/direct p50 latency),
	// "throughput" (proxy/direct req/s), "added" ((proxy p50 − direct p50)
	// / direct p50) or "rss" (the proxy's peak RSS in MiB).
	measure string
	limit   float64
	// atMost: the value must be <= limit; below: < limit; else >= limit.
	atMost, below bool
}

func (t target) String() string {
	switch t.measure {
	case "p50":
		return fmt.Sprintf("p50 ≤ %g× direct", t.limit)
	case "throughput":
		return fmt.Sprintf("thr ≥ %g× direct", t.limit)
	case "added":
		return fmt.Sprintf("added ≤ %g× direct", t.limit)
	case "rss":
		return fmt.Sprintf("RSS < %g MB", t.limit)
	}
	return "-"
}

// result is one scenario's numbers. Ratios are proxy/direct.
type result struct {
	Scenario string  `json:"scenario"`
	Direct   summary `json:"direct"`
	Proxy    summary `json:"proxy"`
	P50Ratio float64 `json:"p50_ratio,omitempty"`
	P99Ratio float64 `json:"p99_ratio,omitempty"`
	ThrRatio float64 `json:"throughput_ratio,omitempty"`
	// AddedTime is (proxy p50 − direct p50) / direct p50: the time the proxy
	// adds in units of the direct time. It is the one signed number: noise
	// can make it negative.
	AddedTime float64 `json:"added_time_ratio"`
	RSSRatio  float64 `json:"rss_ratio,omitempty"`
	Target    string  `json:"target"`
	// Verdict is "pass", "miss", "none" (no target) or "error".
	Verdict string `json:"verdict"`
	Error   string `json:"error,omitempty"`

	measure string // what the ratio column shows, from the target
}

// newResult fills the ratios of two summaries.
func newResult(direct, proxy summary) *result {
	r := &result{Direct: direct, Proxy: proxy}
	if direct.P50ms > 0 {
		r.P50Ratio = proxy.P50ms / direct.P50ms
		r.AddedTime = (proxy.P50ms - direct.P50ms) / direct.P50ms
	}
	if direct.P99ms > 0 {
		r.P99Ratio = proxy.P99ms / direct.P99ms
	}
	if direct.RPS > 0 {
		r.ThrRatio = proxy.RPS / direct.RPS
	}
	return r
}

// judge sets Target and Verdict.
func (r *result) judge(t target) {
	r.Target = t.String()
	r.measure = t.measure
	if r.Error != "" {
		r.Verdict = "error"
		return
	}
	var v float64
	switch t.measure {
	case "p50":
		v = r.P50Ratio
	case "throughput":
		v = r.ThrRatio
	case "added":
		v = r.AddedTime
	case "rss":
		v = r.Proxy.PeakRSSMB
	default:
		r.Verdict = "none"
		return
	}
	pass := v >= t.limit
	switch {
	case t.below:
		pass = v < t.limit
	case t.atMost:
		pass = v <= t.limit
	}
	r.Verdict = map[bool]string{true: "pass", false: "miss"}[pass]
}

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
	b.WriteString("| scenario | n | direct p50 | direct p99 | direct thr | proxy p50 | proxy p99 | proxy thr | proxy/direct | target | result |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(b, "| %s | | | | | | | | error: %s | %s | error |\n", r.Scenario, cell(r.Error), r.Target)
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, r.Proxy.N,
			fmtMs(r.Direct.P50ms), fmtMs(r.Direct.P99ms), fmtRate(r.Direct.RPS),
			fmtMs(r.Proxy.P50ms), fmtMs(r.Proxy.P99ms), fmtRate(r.Proxy.RPS),
			r.ratioText(), r.Target, r.Verdict)
	}
	fmt.Fprintf(b, "\nn is requests (cold starts for coldstart-20) per side over %d alternating rounds; "+
		"latencies are pooled over the rounds, thr is requests per second of wall time. "+
		"coldstart-20 p50 is the median and p99 the slowest start; rss-20x100 latencies are its 8-way calls.\n", rep.Rounds)
	_, err := io.WriteString(w, b.String())
	return err
}

// ratioText is the proxy/direct cell: the judged measure first.
func (r *result) ratioText() string {
	switch r.measure {
	case "throughput":
		return fmt.Sprintf("thr %.2f× (p50 %.2f×)", r.ThrRatio, r.P50Ratio)
	case "added":
		return fmt.Sprintf("added %+.2f× (p50 %.2f×)", r.AddedTime, r.P50Ratio)
	case "rss":
		return fmt.Sprintf("RSS %.1f MB (direct %.1f MB)", r.Proxy.PeakRSSMB, r.Direct.PeakRSSMB)
	}
	if r.ThrRatio > 0 {
		return fmt.Sprintf("p50 %.2f× (thr %.2f×)", r.P50Ratio, r.ThrRatio)
	}
	return fmt.Sprintf("p50 %.2f× (p99 %.2f×)", r.P50Ratio, r.P99Ratio)
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
