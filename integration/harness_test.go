package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// update rewrites the golden files under testdata/ from the upstreams' direct output.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the upstreams' direct results")

// Bounds of every wait in this package. The machine is small and busy, and the
// proxy runs under the race detector when the tests do: these are generous on
// purpose, and a hang fails the test instead of the run.
const (
	startTimeout = 45 * time.Second // a process is up (proxy URL logged, port accepting)
	callTimeout  = 30 * time.Second // one request answered
	exitTimeout  = 20 * time.Second // a process exits after being asked to
)

// Paths filled by TestMain.
var (
	binDir       string // temp dir holding the built binaries
	proxyBin     string // mcp-proxy, built with -race when the tests are
	fixtureBin   string // the fault-injection fixture server
	nodeBin      string // absolute path of node
	everythingJS string // server-everything's entry point
	filesystemJS string // server-filesystem's entry point
)

// npmInstallHint is what to run when the npm peers are missing.
const npmInstallHint = "npm ci --prefix integration --no-audit --no-fund"

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	code := m.Run()
	stopShared()
	return code
}

// buildTimeout bounds one `go build` of the setup (a cold cache on a busy
// machine takes a minute or two).
const buildTimeout = 5 * time.Minute

// setup checks the npm peers and node, then builds the proxy and the fixture.
func setup() error {
	nm, err := filepath.Abs("node_modules")
	if err != nil {
		return err
	}
	everythingJS = filepath.Join(nm, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	filesystemJS = filepath.Join(nm, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	for _, p := range []string{everythingJS, filesystemJS} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("the npm test peers are not installed (%s is missing): run `%s` from the module root (.ci/run does it)", p, npmInstallHint)
		}
	}
	if nodeBin, err = exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is not on PATH; the integration tests need Node.js 20 or later: %w", err)
	}
	if nodeBin, err = filepath.Abs(nodeBin); err != nil {
		return err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("go is not on PATH: %w", err)
	}
	root, err := testproc.ModuleRoot("..")
	if err != nil {
		return err
	}
	if binDir, err = os.MkdirTemp("", "mcp-proxy-integration-"); err != nil {
		return err
	}
	proxyBin = filepath.Join(binDir, "mcp-proxy")
	fixtureBin = filepath.Join(binDir, "fixture")
	// The proxy runs under the race detector too: its stderr is checked for
	// race reports when each process ends.
	err = testproc.Build(root, fixtureBin, "./integration/fixture", false, buildTimeout)
	if err == nil {
		err = testproc.Build(root, proxyBin, "./cmd/mcp-proxy", raceEnabled, buildTimeout)
	}
	if err != nil {
		os.RemoveAll(binDir)
	}
	return err
}

// syncBuffer and tail are the shared test helpers (integration/internal/testproc).
type syncBuffer = testproc.Buffer

var tail = testproc.Tail

// proc is a child process started by a test.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed once Wait has returned
	err    error         // Wait's result, valid after done
	// cleanExit: the process must exit 0 when the test ends it (SIGTERM, or
	// stdin EOF for a stdio proxy).
	cleanExit bool
}

// startProc starts cmd in its own process group with stderr captured, and
// registers a cleanup that stops it: SIGTERM to the group, then SIGKILL after
// exitTimeout. Callers set up stdin/stdout before calling it. onLine, if not
// nil, sees every stderr line as it arrives.
func startProc(t testing.TB, name string, cmd *exec.Cmd, onLine func(string)) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &lineWriter{buf: p.stderr, onLine: onLine}
	// A grandchild that keeps stderr open must not hold up Wait for long.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start %s: %v", name, cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if p.cleanExit && p.err != nil {
			t.Errorf("%s exited with %v when asked to stop, want exit status 0", name, p.err)
		}
		checkRace(t, p)
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, tail(p.stderr.String(), 6000))
		}
	})
	return p
}

// lineWriter keeps everything written to it and hands each complete line to
// onLine. exec's copying goroutine is its only writer.
type lineWriter struct {
	buf     *syncBuffer
	onLine  func(string)
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	_, _ = w.buf.Write(b)
	if w.onLine == nil {
		return len(b), nil
	}
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.onLine(strings.TrimRight(string(w.partial[:i]), "\r"))
		w.partial = w.partial[i+1:]
	}
	return len(b), nil
}

// stop ends the process if it still runs: SIGTERM to its group, then SIGKILL.
func (p *proc) stop(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(exitTimeout):
	}
	t.Errorf("%s did not exit within %s of SIGTERM; killing it", p.name, exitTimeout)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		t.Errorf("%s survived SIGKILL", p.name)
	}
}

// wait waits for the process to exit on its own, at most d.
func (p *proc) wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s", p.name, d)
		return nil
	}
}

// checkRace fails the test when a race-enabled proxy reported a data race.
func checkRace(t testing.TB, p *proc) {
	if race := testproc.RaceReport(p.stderr.String()); race != "" {
		t.Errorf("%s reported a data race:\n%s", p.name, race)
	}
}

// ---- configs ----

// q quotes s as a YAML double-quoted scalar.
func q(s string) string { return strconv.Quote(s) }

// qlist renders a YAML flow sequence of quoted strings.
func qlist(items ...string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = q(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// stdioServer is the YAML of one stdio server under `servers:`; extra lines
// (already indented by four spaces) follow.
func stdioServer(name, command string, args []string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    command: %s\n    args: %s\n", name, q(command), qlist(args...))
	for _, e := range extra {
		b.WriteString("    " + e + "\n")
	}
	return b.String()
}

// httpServer is the YAML of one Streamable HTTP server.
func httpServer(name, url string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    url: %s\n", name, q(url))
	for _, e := range extra {
		b.WriteString("    " + e + "\n")
	}
	return b.String()
}

func fixtureServer(name string, args []string, extra ...string) string {
	return stdioServer(name, fixtureBin, args, extra...)
}

func everythingServer(name string, extra ...string) string {
	return stdioServer(name, nodeBin, []string{everythingJS, "stdio"}, extra...)
}

func filesystemServer(name, dir string, extra ...string) string {
	return stdioServer(name, nodeBin, []string{filesystemJS, dir}, extra...)
}

// writeConfig writes a proxy config: top-level lines, then the servers.
func writeConfig(t testing.TB, top string, servers ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("log: {level: debug, format: json}\n")
	b.WriteString(top)
	if !strings.HasSuffix(top, "\n") && top != "" {
		b.WriteString("\n")
	}
	b.WriteString("servers:\n")
	for _, s := range servers {
		b.WriteString(s)
	}
	path := filepath.Join(t.TempDir(), "mcp-proxy.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ---- proxies ----

// proxyEnv is the environment of the proxy processes: the test's own, with
// the config search variable cleared (only --config counts) and the XDG
// directories inside the run's temp dir, so that nothing (default blob
// files, say) lands in the user's home.
func proxyEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MCP_PROXY_CONFIG=") || strings.HasPrefix(kv, "XDG_STATE_HOME=") ||
			strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"XDG_STATE_HOME="+filepath.Join(binDir, "xdg-state"),
		"XDG_CONFIG_HOME="+filepath.Join(binDir, "xdg-config"))
}

// proxyCmd is `mcp-proxy <args>` with the test environment.
func proxyCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(proxyBin, args...)
	cmd.Env = proxyEnv()
	return cmd
}

// servingMessage is the log message that carries the HTTP endpoint's URL.
const servingMessage = "serving MCP over Streamable HTTP; point your MCP client at this URL"

// startHTTPProxy runs `mcp-proxy serve --config cfg --listen 127.0.0.1:0` and
// returns the MCP URL it logs.
func startHTTPProxy(t testing.TB, cfg string, extra ...string) (string, *proc) {
	t.Helper()
	urls := make(chan string, 1)
	onLine := func(line string) {
		var l struct {
			Message string `json:"message"`
			URL     string `json:"url"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == servingMessage && l.URL != "" {
			select {
			case urls <- l.URL:
			default:
			}
		}
	}
	args := append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, extra...)
	p := startProc(t, "mcp-proxy (http)", proxyCmd(args...), onLine)
	p.cleanExit = true
	select {
	case u := <-urls:
		return u, p
	case <-p.done:
		t.Fatalf("mcp-proxy exited before serving: %v\n%s", p.err, tail(p.stderr.String(), 4000))
	case <-time.After(startTimeout):
		t.Fatalf("mcp-proxy logged no %q line within %s\n%s", servingMessage, startTimeout, tail(p.stderr.String(), 4000))
	}
	return "", nil
}

// ---- shared upstreams ----

// sharedEverything and sharedEverythingSSE are one server-everything in
// Streamable HTTP mode and one in legacy SSE mode for the whole package;
// each keeps one state per MCP session, so tests do not meet.
var sharedEverything, sharedEverythingSSE sharedServer

// sharedServer is a server process the whole package shares.
type sharedServer struct {
	once sync.Once
	url  string
	err  error
	cmd  *exec.Cmd
	done chan struct{}
	log  syncBuffer
}

// everythingHTTP returns the URL of the shared server-everything.
func everythingHTTP(t testing.TB) string {
	t.Helper()
	return sharedEverything.start(t, "streamableHttp")
}

// everythingSSE returns the SSE endpoint URL of the shared server-everything
// in legacy SSE mode.
func everythingSSE(t testing.TB) string {
	t.Helper()
	return sharedEverythingSSE.start(t, "sse")
}

// start starts the shared server-everything in mode once and returns its
// URL.
func (s *sharedServer) start(t testing.TB, mode string) string {
	t.Helper()
	s.once.Do(func() { s.url, s.err = startSharedEverything(s, mode) })
	if s.err != nil {
		t.Fatalf("server-everything (%s): %v", mode, s.err)
	}
	return s.url
}

// startSharedEverything starts server-everything on a port that was free
// a moment ago (it takes its port from PORT, not from the kernel). It is
// ready when it says it listens on that port, which a dial could not tell
// from another process that took the port meanwhile; if one did, and
// server-everything exits for it, another port is tried.
func startSharedEverything(s *sharedServer, mode string) (string, error) {
	var err error
	for range 5 {
		var url string
		var taken bool
		if url, taken, err = startEverythingOnce(s, mode); err == nil || !taken {
			return url, err
		}
	}
	return "", err
}

// startEverythingOnce is one attempt of startSharedEverything; taken says
// that its port was in use.
func startEverythingOnce(s *sharedServer, mode string) (url string, taken bool, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", false, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(nodeBin, everythingJS, mode)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", false, err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); close(done) }()
	// server-everything's own words (2026.8.31, pinned in package.json):
	// this line once it listens; if it cannot, "Port N is already in use"
	// (streamableHttp) or node's EADDRINUSE error (sse).
	listening, path := "MCP Streamable HTTP Server listening on port "+strconv.Itoa(port)+"\n", "/mcp"
	if mode == "sse" {
		listening, path = "Server is running on port "+strconv.Itoa(port)+"\n", "/sse"
	}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if strings.Contains(s.log.String(), listening) {
			return "http://127.0.0.1:" + strconv.Itoa(port) + path, false, nil
		}
		select {
		case <-done:
			log := s.log.String()
			return "", strings.Contains(log, "Port "+strconv.Itoa(port)+" is already in use") || strings.Contains(log, "EADDRINUSE"),
				fmt.Errorf("exited before listening on port %d:\n%s", port, tail(log, 4000))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", false, fmt.Errorf("not listening on port %d after %s:\n%s", port, startTimeout, tail(s.log.String(), 4000))
}

// stopShared stops the shared upstreams at the end of the run.
func stopShared() {
	for _, s := range []*sharedServer{&sharedEverything, &sharedEverythingSSE} {
		if s.cmd == nil {
			continue
		}
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(exitTimeout):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	}
}

// startFixtureHTTP runs the fixture as a Streamable HTTP server and returns
// its MCP URL (read from its "listening on" line).
func startFixtureHTTP(t testing.TB, args ...string) string {
	t.Helper()
	return startFixtureHTTPEnv(t, nil, args...)
}

// startFixtureHTTPEnv is startFixtureHTTP with extra environment variables
// (KEY=value) for the fixture, such as FIXTURE_RECORD.
func startFixtureHTTPEnv(t testing.TB, env []string, args ...string) string {
	t.Helper()
	urls := make(chan string, 1)
	onLine := func(line string) {
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			select {
			case urls <- strings.TrimSpace(rest):
			default:
			}
		}
	}
	cmd := exec.Command(fixtureBin, append([]string{"-http", "127.0.0.1:0"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	p := startProc(t, "fixture (http)", cmd, onLine)
	select {
	case u := <-urls:
		return u
	case <-p.done:
		t.Fatalf("fixture exited before listening: %v\n%s", p.err, p.stderr.String())
	case <-time.After(startTimeout):
		t.Fatalf("fixture did not listen within %s", startTimeout)
	}
	return ""
}

// ---- small helpers ----

// testCtx is a context bounded by d and by the test's end.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// exitCode returns the process exit code in err (0 for nil), or fails.
func exitCode(t testing.TB, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	t.Fatalf("not an exit error: %v", err)
	return -1
}

// runCLI runs `mcp-proxy <args>` to its end (bounded) and returns its
// stdout, stderr and exit code.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv is runCLI with extra environment variables (NAME=value).
func runCLIEnv(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, proxyBin, args...)
	cmd.Env = append(proxyEnv(), env...)
	cmd.WaitDelay = exitTimeout
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mcp-proxy %s did not finish in time\nstderr:\n%s", strings.Join(args, " "), tail(errb.String(), 4000))
	}
	if race := testproc.RaceReport(errb.String()); race != "" {
		t.Errorf("mcp-proxy %s reported a data race:\n%s", strings.Join(args, " "), race)
	}
	return out.String(), errb.String(), exitCode(t, err)
}
