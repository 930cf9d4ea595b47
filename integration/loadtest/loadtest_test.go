package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary take the roles of the floors and the go-sdk
// upstream, as the load test binary does.
func TestMain(m *testing.M) {
	runRoleIfAsked()
	os.Exit(m.Run())
}

// TestRelayCopiesLines: the floor's relay passes each line through as it
// came, long lines included, and ends when the child's output does.
func TestRelayCopiesLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := "a\n" + long + "\n{\"k\":1}\nlast-without-newline"
	var out bytes.Buffer
	if err := copyLines(&out, strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("copyLines changed the stream (%d bytes in, %d out)", len(in), out.Len())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "cat")
	cmd.Env = append(os.Environ(), roleEnv+"="+roleRelay)
	cmd.Stdin = strings.NewReader("one\ntwo\n")
	got, err := cmd.Output()
	if err != nil || string(got) != "one\ntwo\n" {
		t.Errorf("relay of cat = %q, %v; want the two lines", got, err)
	}
}

// TestRunEveryScenario builds mcp-proxy and the fixture, runs every
// scenario that runs by default with every upstream it lists at tiny counts, and checks the table
// and the JSON a user would read: every row present with its sides, no
// error, every number positive, and no process left running.
func TestRunEveryScenario(t *testing.T) {
	dir := t.TempDir()
	proxyBin, fixtureBin := buildBinaries(t, dir)
	jsonPath := filepath.Join(dir, "out.json")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	argv := []string{"loadtest", "-proxy", proxyBin, "-fixture", fixtureBin, "-n", "20", "-rounds", "2", "-json", jsonPath}
	if err := run(ctx, argv, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}

	table := stdout.String()
	for _, want := range []string{"command: `loadtest -proxy " + proxyBin, "machine: nproc ", "| scenario | upstream | n | direct | floor | proxy | judged |"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("JSON output does not parse: %v", err)
	}
	type row struct{ scenario, upstream string }
	var want []row
	for _, sc := range scenarios {
		for _, u := range sc.upstreams {
			if !optIn[sc.name] {
				want = append(want, row{sc.name, u})
			}
		}
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(want))
	}
	for i, r := range rep.Results {
		if (row{r.Scenario, r.Upstream}) != want[i] || r.Error != "" || (r.Verdict != "pass" && r.Verdict != "miss" && r.Verdict != "none") {
			t.Errorf("result %d: %s (%s) verdict %q error %q; want %v", i, r.Scenario, r.Upstream, r.Verdict, r.Error, want[i])
		}
		if !strings.Contains(table, "| "+r.Scenario+" | "+r.Upstream+" | ") {
			t.Errorf("table has no row for %s (%s)", r.Scenario, r.Upstream)
		}
		if r.isFeatureRow() {
			checkFeatureRow(t, r)
			continue
		}
		if _, ok := r.Sides[sideProxy]; !ok {
			t.Errorf("%s (%s): no proxy side", r.Scenario, r.Upstream)
		}
		if strings.HasPrefix(r.Scenario, "call-") {
			floor, ok := r.Sides[sideFloor]
			if !ok || floor.CPUus == nil || r.Sides[sideProxy].CPUus == nil {
				t.Errorf("%s (%s): want a floor side and CPU figures for the floor and the proxy: %+v", r.Scenario, r.Upstream, r.Sides)
			}
			if _, ok := r.Ratios[sideProxy+"/"+sideFloor]; !ok {
				t.Errorf("%s (%s): no proxy/floor ratio", r.Scenario, r.Upstream)
			}
		}
	}
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	if n := checkNumbers(t, "", generic); n < 60 {
		t.Errorf("only %d numbers in the JSON output", n)
	}
	if left := runningBinaries(proxyBin, fixtureBin); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// TestSessionsScenario opens a few sessions with sessions-http, which runs
// only when named, and checks that it reports them all, each with its
// initialize and two calls, and the proxy's peak RSS.
func TestSessionsScenario(t *testing.T) {
	dir := t.TempDir()
	proxyBin, fixtureBin := buildBinaries(t, dir)
	jsonPath := filepath.Join(dir, "out.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	const sessions = 40
	argv := []string{"loadtest", "-proxy", proxyBin, "-fixture", fixtureBin, "-scenarios", "sessions-http",
		"-upstreams", "fixture", "-sessions", strconv.Itoa(sessions), "-json", jsonPath}
	if err := run(ctx, argv, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("JSON output does not parse: %v", err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Scenario != "sessions-http" || rep.Results[0].Error != "" {
		t.Fatalf("results %+v, want one sessions-http row without error", rep.Results)
	}
	p := rep.Results[0].Sides[sideProxy]
	if p.Sessions != sessions || p.N != sessions*(1+sessionCalls) || p.PeakRSSMB <= 0 || p.CPUus == nil {
		t.Errorf("proxy side %+v, want %d sessions, %d requests, a peak RSS and CPU", p, sessions, sessions*(1+sessionCalls))
	}
	if !strings.Contains(stdout.String(), "| sessions-http | fixture | ") {
		t.Errorf("table has no sessions-http row:\n%s", stdout.String())
	}
	if left := runningBinaries(proxyBin, fixtureBin); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// checkFeatureRow checks a feature scenario's sides: the bare proxy and
// either the full one or one per feature of the transport (no OAuth over
// stdio), each with its CPU, its ratios to bare, and an OTLP sink's CPU
// exactly where tracing is on.
func checkFeatureRow(t *testing.T, r *result) {
	t.Helper()
	httpListener := strings.Contains(r.Scenario, "-http")
	want := []string{sideBare, sideFull}
	if strings.HasPrefix(r.Scenario, "features-each-") {
		want = []string{sideBare}
		for _, f := range featuresFor(httpListener, allFeatures) {
			want = append(want, string(f))
		}
	}
	if got := featureSideOrder(r.Sides); !slices.Equal(got, want) || len(r.Sides) != len(want) {
		t.Errorf("%s (%s): sides %v, want %v", r.Scenario, r.Upstream, got, want)
	}
	for _, name := range want {
		s := r.Sides[name]
		if s.CPUus == nil {
			t.Errorf("%s (%s) %s: no CPU figure", r.Scenario, r.Upstream, name)
		}
		traces := name == sideFull || name == string(featTracing)
		if (s.SinkCPUus != nil) != traces {
			t.Errorf("%s (%s) %s: sink CPU %v, want one: %v", r.Scenario, r.Upstream, name, s.SinkCPUus, traces)
		}
		if _, ok := r.Ratios[name+"/"+sideBare]; name != sideBare && !ok {
			t.Errorf("%s (%s): no %s/bare ratio", r.Scenario, r.Upstream, name)
		}
	}
}

// checkNumbers fails on any number that is not positive (the signed judged
// value only has to be finite, and a CPU time over a few requests may round
// to zero ticks) and returns how many it saw.
func checkNumbers(t *testing.T, path string, v any) int {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		n := 0
		for k, e := range x {
			n += checkNumbers(t, path+"."+k, e)
		}
		return n
	case []any:
		n := 0
		for i, e := range x {
			n += checkNumbers(t, path+"["+strconv.Itoa(i)+"]", e)
		}
		return n
	case float64:
		signed := strings.HasSuffix(path, ".value")
		zeroOK := strings.HasSuffix(path, "cpu_per_call_us") || strings.HasSuffix(path, ".cpu_per_call")
		if math.IsNaN(x) || math.IsInf(x, 0) || (!signed && x < 0) || (!signed && !zeroOK && x == 0) {
			t.Errorf("%s = %v, want a positive number", path, x)
		}
		return 1
	}
	return 0
}

// runningBinaries lists live processes whose executable is one of bins.
func runningBinaries(bins ...string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		for _, b := range bins {
			if exe == b {
				if _, _, ok := statFields(pid); ok { // zombies do not count
					out = append(out, e.Name()+" "+exe)
				}
			}
		}
	}
	return out
}

func TestPercentile(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"one sample", ds(7), 50, 7 * time.Millisecond},
		{"median of odd", ds(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"median of even is the lower", ds(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 5 is the max", ds(1, 2, 3, 4, 5), 99, 5 * time.Millisecond},
		{"p99 of 200", ds(seq(200)...), 99, 198 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestReadSSE(t *testing.T) {
	tests := []struct {
		name     string
		stream   string
		wantRes  string
		wantErr  string
		requests int
	}{
		{"response only", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"a\":1}}\n\n", `{"a":1}`, "", 0},
		{"notification then response", ": comment\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n" +
			"id: 9\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n", `{}`, "", 0},
		{"server request answered", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n", `{}`, "", 1},
		{"multi-line data", "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":3,\"result\":{}}\n\n", `{}`, "", 0},
		{"last event without blank line", "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", `{}`, "", 0},
		{"ends without response", "data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n", "", "event stream ended before the response", 0},
		{"other id", "data: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n\n", "", "response to request 4, want 3", 0},
		{"not JSON", "data: {oops\n\n", "", "bad JSON-RPC message", 0},
		{"rpc error", "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602,\"message\":\"bad\"}}\n\n", "", "JSON-RPC error -32602: bad", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requests := 0
			e, err := readSSE(strings.NewReader(tc.stream), "3", func(*envelope) error { requests++; return nil })
			var res json.RawMessage
			if err == nil {
				res, err = e.outcome()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(res) != tc.wantRes || requests != tc.requests {
				t.Fatalf("got %s, %v, %d server requests; want %s, %d", res, err, requests, tc.wantRes, tc.requests)
			}
		})
	}
}

// FuzzReadSSE checks the event stream reader never panics and ends with a
// response or an error on any input.
func FuzzReadSSE(f *testing.F) {
	f.Add("data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n")
	f.Add("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n")
	f.Add("data:\n\ndata: [\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		e, err := readSSE(strings.NewReader(stream), "3", func(*envelope) error { return nil })
		if (e == nil) == (err == nil) {
			t.Fatalf("readSSE returned %v and %v", e, err)
		}
		if e != nil && idKey(e.ID) != "3" {
			t.Fatalf("returned a response to %s", e.ID)
		}
	})
}

func TestParseOptionsErrors(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no binaries", nil, "-proxy and -fixture are required"},
		{"unknown upstream", []string{"-proxy", exe, "-fixture", exe, "-upstreams", "gosdk,nope"}, `unknown upstream "nope"`},
		{"peer not executable", []string{"-proxy", exe, "-fixture", exe, "-peer", os.DevNull}, "is not an executable file"},
		{"unknown scenario", []string{"-proxy", exe, "-fixture", exe, "-scenarios", "call-stdio-c1,nope"}, `unknown scenario "nope"`},
		{"n below rounds", []string{"-proxy", exe, "-fixture", exe, "-n", "2", "-rounds", "3"}, "-n must be at least -rounds"},
		{"not executable", []string{"-proxy", exe, "-fixture", os.DevNull}, "is not an executable file"},
		{"stray argument", []string{"-proxy", exe, "-fixture", exe, "extra"}, "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOptions(tc.args, &bytes.Buffer{})
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error containing %q", err, tc.want)
			}
		})
	}
}

func TestReadyLines(t *testing.T) {
	tests := []struct {
		name  string
		parse func(string) (string, bool)
		line  string
		want  string
	}{
		{"fixture", fixtureURL, "listening on http://127.0.0.1:4242/mcp", "http://127.0.0.1:4242/mcp"},
		{"fixture other line", fixtureURL, "fixture: serving stdio: 17 tools listed", ""},
		{"fixture not loopback", fixtureURL, "listening on http://10.0.0.1:4242/mcp", ""},
		{"proxy", proxyURL, `{"level":"info","url":"http://127.0.0.1:5555/mcp","message":"serving MCP"}`, "http://127.0.0.1:5555/mcp"},
		{"proxy metrics path", proxyURL, `{"level":"info","url":"http://127.0.0.1:9464/metrics","message":"serving metrics"}`, ""},
		{"proxy all interfaces", proxyURL, `{"url":"http://0.0.0.0:5555/mcp"}`, ""},
		{"proxy not JSON", proxyURL, `INF serving url=http://127.0.0.1:5555/mcp`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.parse(tc.line)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("got %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// buildBinaries builds mcp-proxy and the fixture into dir and returns
// their paths.
func buildBinaries(t *testing.T, dir string) (proxyBin, fixtureBin string) {
	t.Helper()
	proxyBin, fixtureBin = filepath.Join(dir, "mcp-proxy"), filepath.Join(dir, "fixture")
	for bin, pkg := range map[string]string{proxyBin: "./cmd/mcp-proxy", fixtureBin: "./integration/fixture"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return proxyBin, fixtureBin
}
