package conformance

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// Bounds of every wait. The machine is small and shared, and the proxy runs
// under the race detector when the tests do: these are generous on purpose,
// so that a hang fails the test instead of the whole run.
const (
	buildTimeout = 5 * time.Minute  // go build of the proxy and of the reference server
	startTimeout = 45 * time.Second // a process accepts connections (and the proxy is ready)
	suiteTimeout = 4 * time.Minute  // one run of the whole server suite (about 3 s unloaded)
	listTimeout  = time.Minute      // `conformance list`, `node --version`
	exitTimeout  = 20 * time.Second // a process exits after SIGTERM (then after SIGKILL)
	pollInterval = 50 * time.Millisecond
)

// startAttempts is how many times a server is started on a fresh port when
// the one picked was taken in between (freePort cannot reserve it).
const startAttempts = 3

// buildBinaries builds mcp-proxy (with -race when the tests have it) and
// the reference server into dir.
func buildBinaries(root, dir string) (proxy, server string, err error) {
	proxy, server = filepath.Join(dir, "mcp-proxy"), filepath.Join(dir, "everything-server")
	if err := testproc.Build(root, proxy, "./cmd/mcp-proxy", raceEnabled, buildTimeout); err != nil {
		return "", "", err
	}
	if err := testproc.Build(root, server, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server", false, buildTimeout); err != nil {
		return "", "", err
	}
	return proxy, server, nil
}

// logBuffer and tail are the shared test helpers (integration/internal/testproc).
type logBuffer = testproc.Buffer

var tail = testproc.Tail

// proc is a long-running child of a test (a server), in its own process
// group, with its stderr captured.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *logBuffer
	done   chan struct{} // closed once Wait has returned
	err    error         // Wait's result, valid after done
}

// startProc starts cmd in a process group of its own.
func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{name: name, cmd: cmd, stderr: &logBuffer{}, done: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = p.stderr // neither server writes to stdout in these modes; keep it if one does
	cmd.Stderr = p.stderr
	// A grandchild holding the pipes open must not hold up Wait for long.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
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

// errNotStopped: a process outlived SIGTERM (it was then killed).
var errNotStopped = errors.New("did not exit on SIGTERM")

// stop ends the process if it still runs: SIGTERM to its group, then
// SIGKILL after exitTimeout. It returns the process's exit error when the
// process was already gone or ended on SIGTERM (nil for status 0), and
// errNotStopped when it had to be killed.
func (p *proc) stop() error {
	if p.exited() {
		return p.err
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(exitTimeout):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return fmt.Errorf("%s %w within %s and was killed", p.name, errNotStopped, exitTimeout)
	case <-time.After(exitTimeout):
		return fmt.Errorf("%s %w and survived SIGKILL for %s", p.name, errNotStopped, exitTimeout)
	}
}

// raceReport returns the first data race report in the process's stderr,
// or "".
func (p *proc) raceReport() string { return testproc.RaceReport(p.stderr.String()) }

// errExited: a server ended before it was ready.
var errExited = errors.New("exited before it was ready")

// waitReady polls url until it answers 200, the process exits (errExited)
// or startTimeout passes. Any HTTP answer counts when url is a plain port
// probe (want200 false).
func waitReady(p *proc, url string, want200 bool) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(startTimeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s %w (%v):\n%s", p.name, errExited, p.err, tail(p.stderr.String(), 3000))
		}
		res, err := hc.Get(url)
		if err == nil {
			_ = res.Body.Close()
			if !want200 || res.StatusCode == http.StatusOK {
				return nil
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("%s: %s not ready within %s (last: %s)", p.name, url, startTimeout, last)
}

// startServer starts a server on a fresh loopback port and waits until
// ready answers: newCmd builds the command for a port, ready is the URL
// path to poll ("" only waits for any HTTP answer on "/"). A server that
// exits before it is ready (the port was taken meanwhile, say) is tried
// again on another port, startAttempts times in all.
func startServer(name, readyPath string, newCmd func(port int) *exec.Cmd) (*proc, int, error) {
	var lastErr error
	for range startAttempts {
		port, err := testproc.FreePort()
		if err != nil {
			return nil, 0, err
		}
		p, err := startProc(name, newCmd(port))
		if err != nil {
			return nil, 0, err
		}
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		if readyPath == "" {
			err = waitReady(p, base+"/", false)
		} else {
			err = waitReady(p, base+readyPath, true)
		}
		if err == nil {
			return p, port, nil
		}
		_ = p.stop()
		lastErr = err
		if !errors.Is(err, errExited) {
			break
		}
	}
	return nil, 0, lastErr
}

// waitGone waits until no process runs binary, at most d, and returns the
// pids still running then.
func waitGone(binary string, d time.Duration) []int { return testproc.WaitGone(d, binary) }
