package scaleout

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// Bounds of every wait. The machine is small and shared, and the replicas
// run under the race detector when the test does: these are generous on
// purpose, so that a hang fails the test instead of the run.
const (
	buildTimeout = 5 * time.Minute  // go build of the proxy and the fixture
	startTimeout = 60 * time.Second // a process serves (URL logged, port accepting, ready)
	callTimeout  = 30 * time.Second // one HTTP request answered
	exitTimeout  = 20 * time.Second // a process exits after being asked to
)

// buildBinaries builds mcp-proxy (with -race when the test has it) and the
// fixture into a temporary directory.
func buildBinaries(t *testing.T) (proxy, fixture string) {
	t.Helper()
	root, err := testproc.ModuleRoot(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	proxy, fixture = filepath.Join(dir, "mcp-proxy"), filepath.Join(dir, "fixture")
	if err := testproc.Build(root, fixture, "./integration/fixture", false, buildTimeout); err != nil {
		t.Fatal(err)
	}
	if err := testproc.Build(root, proxy, "./cmd/mcp-proxy", raceEnabled, buildTimeout); err != nil {
		t.Fatal(err)
	}
	return proxy, fixture
}

// logBuffer and tail are the shared test helpers (integration/internal/testproc).
type logBuffer = testproc.Buffer

var tail = testproc.Tail

// proc is a child process of the test, in its own process group.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *logBuffer
	done   chan struct{} // closed once Wait has returned
	err    error         // Wait's result, valid after done
	// cleanExit: the process must exit with status 0 when the test stops
	// it with SIGTERM.
	cleanExit bool
}

// startProc starts cmd in its own process group with stderr captured
// (onLine, if not nil, sees each line as it arrives) and registers a
// cleanup that stops it: SIGTERM, then SIGKILL to the group after
// exitTimeout.
func startProc(t *testing.T, name string, cmd *exec.Cmd, onLine func(string)) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, stderr: &logBuffer{}, done: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start %s: %v", name, cmd.Path, err)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		br := bufio.NewReaderSize(pipe, 64<<10)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				_, _ = p.stderr.Write([]byte(line))
				if onLine != nil {
					onLine(strings.TrimRight(line, "\r\n"))
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-drained // Wait closes the pipe: read it to the end first
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.stop(t) && p.cleanExit && p.err != nil {
			t.Errorf("%s exited with %v on SIGTERM, want status 0", name, p.err)
		}
		if race := testproc.RaceReport(p.stderr.String()); race != "" {
			t.Errorf("%s reported a data race:\n%s", name, race)
		}
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, tail(p.stderr.String(), 4000))
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process if it still runs: SIGTERM, then SIGKILL to its
// group after exitTimeout. It reports whether the test stopped it (false
// when it had already exited).
func (p *proc) stop(t *testing.T) bool {
	if p.exited() {
		return false
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(exitTimeout):
	}
	t.Errorf("%s did not exit within %s of SIGTERM; killing its process group", p.name, exitTimeout)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		t.Errorf("%s survived SIGKILL", p.name)
	}
	return true
}

// kill sends SIGKILL to the process alone (not its children, which the
// proxy runs in process groups of their own) and waits for it to end.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		t.Fatalf("%s survived SIGKILL for %s", p.name, exitTimeout)
	}
}

// waitGone waits until no process runs binary with arg, at most d.
func waitGone(binary, arg string, d time.Duration) []int { return testproc.WaitGone(d, binary, arg) }
