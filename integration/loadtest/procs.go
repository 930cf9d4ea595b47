package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process shutdown budgets. A stdio MCP server exits on stdin EOF; the proxy
// first closes its upstreams (its own budget is 5 s), so stdinGrace leaves
// room for that before signals take over.
const (
	stdinGrace = 8 * time.Second
	termGrace  = 3 * time.Second
	killWait   = 3 * time.Second
	// pipeDrainDelay bounds how long Wait keeps copying stderr after the
	// process exited, in case a grandchild still holds the pipe.
	pipeDrainDelay = 2 * time.Second
	// orphanPoll is how often stop checks that the proxy's children are gone.
	orphanPoll = 20 * time.Millisecond
	// exitStatusWait is how long an error message waits for a process that
	// closed its stdout to report its exit status.
	exitStatusWait = 200 * time.Millisecond
	// stderrTailLines is how much of a process's stderr an error shows.
	stderrTailLines = 8
	// maxStderrLine bounds one remembered stderr line.
	maxStderrLine = 4096
)

// procSpec says how to start one process.
type procSpec struct {
	name string
	path string
	args []string
	// stdio gives the process stdin and stdout pipes for MCP; closing stdin
	// is then the first, polite way to stop it.
	stdio bool
	// ready, when set, is called on every stderr line; the first value it
	// accepts is delivered by proc.waitReady (the address an HTTP server
	// bound).
	ready func(line string) (string, bool)
	// env is added to the load test's own environment.
	env []string
}

// proc is one started process. stop is safe to call more than once; only
// the first call does the work and reports its error.
type proc struct {
	spec    procSpec
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  io.ReadCloser
	stderr  *lineWriter
	done    chan struct{} // closed when Wait returned
	waitErr error         // valid after done

	stopOnce sync.Once
}

// fleet owns every process the load test started; stopAll ends what is
// still running. Safe for concurrent use.
type fleet struct {
	mu    sync.Mutex
	procs []*proc
}

// start starts spec as the leader of a new process group.
func (f *fleet) start(spec procSpec) (*proc, error) {
	cmd := exec.Command(spec.path, spec.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeDrainDelay
	if len(spec.env) > 0 {
		cmd.Env = append(os.Environ(), spec.env...)
	}
	p := &proc{spec: spec, cmd: cmd, done: make(chan struct{}), stderr: newLineWriter(spec.ready)}
	cmd.Stderr = p.stderr
	if spec.stdio {
		var err error
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, fmt.Errorf("%s: stdin pipe: %w", spec.name, err)
		}
		if p.stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, fmt.Errorf("%s: stdout pipe: %w", spec.name, err)
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", spec.name, spec.path, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	return p, nil
}

// stopAll stops every process, newest first, and joins their errors.
func (f *fleet) stopAll() error {
	f.mu.Lock()
	procs := f.procs
	f.procs = nil
	f.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		errs = append(errs, procs[i].stop())
	}
	return errors.Join(errs...)
}

// pid is the process id (and process group id).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// startReady starts spec and waits for its ready line; stop is the
// process's stop (nil when it did not start), to be deferred either way.
func (f *fleet) startReady(ctx context.Context, spec procSpec) (p *proc, readyValue string, err error) {
	if p, err = f.start(spec); err != nil {
		return nil, "", err
	}
	readyValue, err = p.waitReady(ctx)
	return p, readyValue, err
}

// waitReady returns the value spec.ready accepted, or an error when the
// process exits first or ctx ends.
func (p *proc) waitReady(ctx context.Context) (string, error) {
	select {
	case v := <-p.stderr.readyc:
		return v, nil
	case <-p.done:
		return "", fmt.Errorf("%s exited before it was ready (%v); stderr: %s", p.spec.name, p.waitErr, p.stderr.tail())
	case <-ctx.Done():
		return "", fmt.Errorf("%s: waiting for its ready line: %w; stderr: %s", p.spec.name, ctx.Err(), p.stderr.tail())
	}
}

// failure describes why the process is unusable, for an error message. A
// closed stdout usually means the process is exiting, so it waits a moment
// for the exit status.
func (p *proc) failure() string {
	if waitClosed(p.done, exitStatusWait) {
		return fmt.Sprintf("%s exited (%v); stderr: %s", p.spec.name, p.waitErr, p.stderr.tail())
	}
	return fmt.Sprintf("%s is running; stderr: %s", p.spec.name, p.stderr.tail())
}

// stop ends the process and everything it started: close stdin and wait,
// SIGTERM the group and wait, SIGKILL the group; then kill any descendant
// that lives in another process group (the proxy starts each upstream in a
// group of its own) and outlived its parent.
func (p *proc) stop() error {
	var err error
	p.stopOnce.Do(func() { err = p.doStop() })
	return err
}

func (p *proc) doStop() error {
	kids := descendants(p.pid())
	if p.stdin != nil {
		_ = p.stdin.Close()
		waitClosed(p.done, stdinGrace)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if closed(p.done) {
			break
		}
		if err := syscall.Kill(-p.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("%s: %v: %w", p.spec.name, sig, err)
		}
		waitClosed(p.done, termGrace)
	}
	if !waitClosed(p.done, killWait) {
		return fmt.Errorf("%s (pid %d) was not reaped after SIGKILL", p.spec.name, p.pid())
	}
	return reapOrphans(kids)
}

// reapOrphans waits for the given descendants to exit on their own (a stdio
// upstream exits at stdin EOF), then SIGKILLs the ones still running.
func reapOrphans(kids []procID) error {
	deadline := time.Now().Add(termGrace)
	for len(kids) > 0 && time.Now().Before(deadline) {
		kids = stillRunning(kids)
		if len(kids) > 0 {
			time.Sleep(orphanPoll)
		}
	}
	for _, k := range kids {
		_ = syscall.Kill(k.pid, syscall.SIGKILL)
	}
	deadline = time.Now().Add(killWait)
	for len(kids) > 0 && time.Now().Before(deadline) {
		time.Sleep(orphanPoll)
		kids = stillRunning(kids)
	}
	if len(kids) > 0 {
		return fmt.Errorf("%d child processes survived SIGKILL (first pid %d)", len(kids), kids[0].pid)
	}
	return nil
}

// peakRSSBytes reads VmHWM (peak resident set size) of the running process.
func (p *proc) peakRSSBytes() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, fmt.Errorf("%s: read status: %w", p.spec.name, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: unexpected VmHWM line %q", p.spec.name, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: VmHWM: %w", p.spec.name, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("%s: no VmHWM in /proc status", p.spec.name)
}

// procID identifies a process across pid reuse: pid plus start time.
type procID struct {
	pid   int
	start string
}

// statFields returns the ppid and start time of pid from /proc/<pid>/stat.
func statFields(pid int) (ppid int, start string, ok bool) {
	f, ok := readStat(pid)
	if !ok {
		return 0, "", false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, "", false
	}
	return ppid, f[19], true
}

// readStat returns the fields of /proc/<pid>/stat after the command name
// (f[0] is the state, f[1] the ppid, ...), or false for a process that is
// gone or a zombie.
func readStat(pid int) ([]string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	// The command name is in parentheses and may hold anything; the fields
	// after its last ')' are state, ppid, ... with starttime the 20th.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return nil, false
	}
	return f, true
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for user space on every architecture.
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time (user + system, all threads, not its children)
// the running process has used so far, from /proc/<pid>/stat, in steps of
// clockTick.
func (p *proc) cpuTime() (time.Duration, error) {
	f, ok := readStat(p.pid())
	if !ok {
		return 0, fmt.Errorf("%s: no /proc stat (exited?)", p.spec.name)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%s: /proc stat: %w", p.spec.name, err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// descendants lists every live descendant of root, from one scan of /proc.
func descendants(root int) []procID {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procID{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, start, ok := statFields(pid); ok {
			children[ppid] = append(children[ppid], procID{pid: pid, start: start})
		}
	}
	var out []procID
	queue := []int{root}
	for len(queue) > 0 && len(out) < len(entries) {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// stillRunning keeps the processes that are alive and not zombies.
func stillRunning(ids []procID) []procID {
	var out []procID
	for _, id := range ids {
		if _, start, ok := statFields(id.pid); ok && start == id.start {
			out = append(out, id)
		}
	}
	return out
}

func waitClosed(c <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
		return false
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// lineWriter is a process's stderr: it splits lines, remembers the last few
// for error messages and hands the first line ready accepts to readyc.
// exec.Cmd calls Write from one goroutine; tail may run concurrently.
type lineWriter struct {
	ready  func(string) (string, bool)
	readyc chan string
	found  bool
	buf    []byte

	mu    sync.Mutex
	lines []string
}

func newLineWriter(ready func(string) (string, bool)) *lineWriter {
	return &lineWriter{ready: ready, readyc: make(chan string, 1)}
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxStderrLine {
		w.line(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(b), nil
}

func (w *lineWriter) line(s string) {
	if len(s) > maxStderrLine {
		s = s[:maxStderrLine]
	}
	if w.ready != nil && !w.found {
		if v, ok := w.ready(s); ok {
			w.found = true
			w.readyc <- v
		}
	}
	w.mu.Lock()
	w.lines = append(w.lines, s)
	if len(w.lines) > stderrTailLines {
		w.lines = w.lines[len(w.lines)-stderrTailLines:]
	}
	w.mu.Unlock()
}

// tail returns the last stderr lines, for an error message.
func (w *lineWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lines) == 0 {
		return "(empty)"
	}
	return strings.Join(w.lines, " | ")
}
