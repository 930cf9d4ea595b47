//go:build conformance2026

package conformance2026

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/confrunner"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

const (
	// everythingServerPkg is the official Go SDK's conformance server (the
	// go-sdk version of go.mod), which serves both protocol eras.
	everythingServerPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"
	// suiteTimeout bounds one run of the server scenarios (seconds unloaded).
	suiteTimeout = 5 * time.Minute
	// startTimeout bounds a server's or the proxy's start (the proxy is
	// ready once its upstream is connected).
	startTimeout = 45 * time.Second
	// stopTimeout bounds a process's exit after SIGTERM, then after SIGKILL.
	stopTimeout = 20 * time.Second
)

// requirements is the requirement set the server scenarios are run with.
var requirements = []string{"--requirements", "2026-07-28"}

// leftOut reports whether a scenario is left out of the comparison: the
// tasks extension's scenarios (go-sdk's everything-server does not
// implement the extension, so they fail directly, and the proxy declares
// the extension only for an upstream that does).
func leftOut(scenario string) bool { return strings.HasPrefix(scenario, "tasks-") }

// proxyVariant is one way of putting the everything-server behind the proxy.
type proxyVariant struct {
	name      string
	transport string // the upstream's: stdio or http
	protocol  string // the proxy's protocol setting for it
	// stateless is the HTTP server's -stateless: its 2026-07-28 wire needs
	// it, and a 2025-11-25 session needs sessions (its requests to the
	// client travel on them).
	stateless bool
	// differs lists the scenarios whose verdict through the proxy is
	// expected to differ from the direct run's, each with the reason. A
	// listed scenario whose verdicts agree fails the test: take it off.
	differs map[string]string
}

// The reasons shared by the variants: each is where the 2025-11-25 era
// loses something the scenario needs.
const (
	whySessionCaps = "a 2025-11-25 client declares its capabilities once, at initialize, for the session, and a stdio " +
		"server has one session (its process), the proxy's, declared with sampling, elicitation and roots so that it " +
		"can relay for any client: test_missing_capability sees sampling declared and runs, so there is no -32021 " +
		"(over Streamable HTTP the call goes on a session declaring the client's capabilities, and agrees)"
	whySessionAsks = "the stdio server's one session declares the proxy's capabilities (see server-stateless), so the " +
		"server asks for elicitation too, which this client did not declare and the proxy refuses with -32021; directly " +
		"the server asks only for sampling"
	whyOneRound = "2025-11-25 has no result that asks for more input: go-sdk's server asks a session-era client one " +
		"round as requests, calls its handler once more and returns the second round's input requests in a plain " +
		"result (mcp/mrtr.go), which the proxy, its 2025-11-25 client, receives as the call's complete result"
	whyNoKeys = "a 2025-11-25 server asks with a plain elicitation/create request, which has no input-request key: " +
		"the key (user_name) exists only in a 2026-07-28 input_required result, so the proxy names the input " +
		"request with a key of its own"
	whyNoAnswersAhead = "the first call carries inputResponses (user_name) ahead of any question: a 2025-11-25 " +
		"tools/call has no inputResponses, and the question the server then sends has no key to match an answer " +
		"to, so the call asks (input_required) where directly it completes"
)

var proxyVariants = []proxyVariant{
	{
		name: "stdio/2025-11-25", transport: "stdio", protocol: "2025-11-25",
		differs: map[string]string{
			"server-stateless":                          whySessionCaps,
			"input-required-result-basic-elicitation":   whyNoKeys,
			"input-required-result-multi-round":         whyOneRound,
			"input-required-result-ignore-extra-params": whyNoAnswersAhead,
			"input-required-result-capability-check":    whySessionAsks,
		},
	},
	{
		name: "stdio/2026-07-28", transport: "stdio", protocol: "2026-07-28",
	},
	{
		name: "http/2025-11-25", transport: "http", protocol: "2025-11-25",
		differs: map[string]string{
			"input-required-result-basic-elicitation":   whyNoKeys,
			"input-required-result-multi-round":         whyOneRound,
			"input-required-result-ignore-extra-params": whyNoAnswersAhead,
		},
	},
	{
		name: "http/auto", transport: "http", protocol: "auto", stateless: true,
	},
}

// TestConformance2026Server runs the server scenarios of the 2026-07-28
// requirement set straight at go-sdk's everything-server (Streamable HTTP,
// stateless, where it speaks 2026-07-28), then at mcp-proxy (Streamable
// HTTP, path /mcp) with that server as its upstream in each proxyVariant,
// and requires every scenario's verdict through the proxy (pass: no
// FAILURE or WARNING check) to equal the direct one, but for the variant's
// differs. It logs the table of results.
func TestConformance2026Server(t *testing.T) {
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	r, err := confrunner.FindPinned(here)
	if err != nil {
		t.Fatal(err)
	}
	root, err := testproc.ModuleRoot(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	proxy, server := filepath.Join(dir, "mcp-proxy"), filepath.Join(dir, "everything-server")
	if err := testproc.Build(root, proxy, "./cmd/mcp-proxy", false, buildTimeout); err != nil {
		t.Fatal(err)
	}
	if err := testproc.Build(root, server, everythingServerPkg, false, buildTimeout); err != nil {
		t.Fatal(err)
	}

	direct := runDirect(t, r, server, filepath.Join(dir, "direct"))
	names := direct.Names()
	passed := 0
	for _, name := range names {
		if leftOut(name) {
			continue
		}
		if s := direct.Scenarios[name]; s.Passed() {
			passed++
		} else {
			// The comparison means nothing if the baseline is broken.
			t.Errorf("%s fails against everything-server directly:\n%s", name, s.Problems())
		}
	}
	t.Logf("directly: %d of %d pass (the tasks extension's scenarios left out)", passed, countCompared(names))
	if t.Failed() {
		t.FailNow()
	}

	runs := make([]*confrunner.ServerRun, len(proxyVariants))
	for i, v := range proxyVariants {
		t.Run(v.name, func(t *testing.T) {
			runs[i] = runProxied(t, r, proxy, server, filepath.Join(dir, fmt.Sprint(i)), v)
			if runs[i] != nil {
				judge(t, names, direct, runs[i], v)
			}
		})
	}
	t.Logf("2026-07-28 server scenarios (node %s), directly and through mcp-proxy:\n%s", r.NodeVersion, table(names, direct, runs))
}

// countCompared is how many of names the comparison covers.
func countCompared(names []string) int {
	n := 0
	for _, name := range names {
		if !leftOut(name) {
			n++
		}
	}
	return n
}

// judge reports every scenario whose verdict through the proxy differs
// from the direct one without v.differs saying why, and every entry of
// v.differs that does not hold.
func judge(t *testing.T, names []string, direct, proxied *confrunner.ServerRun, v proxyVariant) {
	t.Helper()
	agree, compared := 0, 0
	for _, name := range names {
		if leftOut(name) {
			continue
		}
		compared++
		d, p := direct.Scenarios[name], proxied.Scenarios[name]
		why, listed := v.differs[name]
		switch {
		case p == nil:
			t.Errorf("%s has no result through mcp-proxy", name)
		case p.Passed() == d.Passed() && listed:
			t.Errorf("%s agrees with the direct run now: take it off the differences of %s (%s)", name, v.name, why)
		case p.Passed() != d.Passed() && !listed:
			t.Errorf("%s passes against everything-server directly but fails through mcp-proxy:\n%s", name, p.Problems())
		}
		if p != nil && p.Passed() == d.Passed() {
			agree++
		}
	}
	for name := range v.differs {
		if _, ok := direct.Scenarios[name]; !ok {
			t.Errorf("the differences of %s name %s, which the runner did not run", v.name, name)
		}
	}
	t.Logf("through mcp-proxy (%s): %d of %d scenarios as directly", v.name, agree, compared)
}

// table renders the verdicts, one row per scenario, one column per run:
// pass or FAIL and the SUCCESS checks out of the judged ones.
func table(names []string, direct *confrunner.ServerRun, runs []*confrunner.ServerRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-46s %-10s", "scenario", "direct")
	for _, v := range proxyVariants {
		fmt.Fprintf(&b, " %-17s", v.name)
	}
	b.WriteString("\n")
	for _, name := range names {
		fmt.Fprintf(&b, "  %-46s %-10s", name, cell(direct.Scenarios[name]))
		for _, run := range runs {
			var s *confrunner.Result
			if run != nil {
				s = run.Scenarios[name]
			}
			fmt.Fprintf(&b, " %-17s", cell(s))
		}
		if leftOut(name) {
			b.WriteString("  (left out: tasks extension)")
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func cell(s *confrunner.Result) string {
	if s == nil {
		return "-"
	}
	verdict := "pass"
	if !s.Passed() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s %d/%d", verdict, s.Count("SUCCESS"), s.Count("SUCCESS")+s.Count("FAILURE")+s.Count("WARNING"))
}

// runDirect runs the scenarios at a stateless everything-server of its own.
func runDirect(t *testing.T, r *confrunner.Runner, server, dir string) *confrunner.ServerRun {
	t.Helper()
	url := startEverything(t, server, true, dir)
	return runSuite(t, r, url, filepath.Join(dir, "results"))
}

// runProxied runs the scenarios at a proxy of its own with the upstream of
// v, or fails t and returns nil.
func runProxied(t *testing.T, r *confrunner.Runner, proxy, server, dir string, v proxyVariant) *confrunner.ServerRun {
	t.Helper()
	upstream := fmt.Sprintf("    command: %q\n", server)
	if v.transport == "http" {
		upstream = fmt.Sprintf("    url: %q\n", startEverything(t, server, v.stateless, dir))
	}
	// required: /readyz answers 200 only once the upstream is connected, so
	// no scenario races its start. prefix "": the scenarios call the
	// server's tools, prompts and resources by their own names.
	cfg := fmt.Sprintf(`log: {level: warn, format: json}
blobs: {mode: passthrough}
servers:
  conf:
%s    prefix: ""
    required: true
    protocol: %q
`, upstream, v.protocol)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "mcp-proxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testproc.MustFreePort(t)
	cmd := exec.Command(proxy, "serve", "--config", cfgPath, "--listen", "127.0.0.1:"+strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_STATE_HOME="+filepath.Join(dir, "state"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	p := start(t, "mcp-proxy", cmd)
	waitHTTP(t, p, "http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", true)
	// localhost, not 127.0.0.1: dns-rebinding-protection sends Host
	// localhost:PORT as the valid case.
	run := runSuite(t, r, "http://localhost:"+strconv.Itoa(port)+"/mcp", filepath.Join(dir, "results"))
	if err := p.stop(); err != nil {
		t.Errorf("mcp-proxy on SIGTERM: %v, want exit status 0", err)
	}
	if t.Failed() {
		t.Logf("mcp-proxy stderr (tail):\n%s", testproc.Tail(p.out.String(), 6000))
	}
	return run
}

// runSuite runs the requirement set's server scenarios at url.
func runSuite(t *testing.T, r *confrunner.Runner, url, out string) *confrunner.ServerRun {
	t.Helper()
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	run, err := r.Server(ctx, url, out, requirements...)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// startEverything runs everything-server over Streamable HTTP on a free
// loopback port until the test ends, and returns its URL.
func startEverything(t *testing.T, server string, stateless bool, dir string) string {
	t.Helper()
	port := testproc.MustFreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(server, "-http="+addr, fmt.Sprintf("-stateless=%v", stateless))
	cmd.Env = append(os.Environ(), "HOME="+dir)
	p := start(t, "everything-server", cmd)
	// It dies of SIGTERM (it has no handler): only a failure to stop counts.
	t.Cleanup(func() {
		if err := p.stop(); errors.Is(err, errNotStopped) {
			t.Error(err)
		}
	})
	waitHTTP(t, p, "http://"+addr+"/", false)
	return "http://localhost:" + strconv.Itoa(port) + "/"
}

// proc is a server the test started, in a process group of its own.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *testproc.Buffer
	done chan struct{}
	err  error // Wait's, once done is closed
}

// start starts cmd with its output captured; a cleanup stops it.
func start(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, out: &testproc.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = stopTimeout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { _ = p.stop() })
	return p
}

var errNotStopped = errors.New("did not exit on SIGTERM")

// stop sends SIGTERM to the process group, then SIGKILL, and returns the
// exit error (nil for status 0), or errNotStopped when it had to be killed.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(stopTimeout):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s %w within %s", p.name, errNotStopped, stopTimeout)
}

// waitHTTP polls url until it answers (200 when want200), failing the test
// if the process exits first or startTimeout passes.
func waitHTTP(t *testing.T, p *proc, url string, want200 bool) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(startTimeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready (%v):\n%s", p.name, p.err, testproc.Tail(p.out.String(), 3000))
		default:
		}
		res, err := hc.Get(url)
		if err == nil {
			_ = res.Body.Close()
			if !want200 || res.StatusCode == http.StatusOK {
				return
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %s not ready within %s (last: %s):\n%s", p.name, url, startTimeout, last, testproc.Tail(p.out.String(), 3000))
}
