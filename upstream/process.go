package upstream

import (
	"bufio"
	"bytes"
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

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/fdmode"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/rs/zerolog"
)

// Shutdown of a stdio child (docs/operations.md#child-processes-linux): close its stdin, give it stdinGrace
// to exit, SIGTERM its whole process group, give it termGrace, SIGKILL the
// group. Worst case Close of a stdio server takes about
// stdinGrace+termGrace+killWait+drainWait.
const (
	// stdinGrace is how long a child may take to exit after its stdin closed;
	// well-behaved MCP servers exit at once on EOF.
	stdinGrace = 2 * time.Second
	// termGrace is how long the group may take to exit after SIGTERM.
	termGrace = 3 * time.Second
	// killWait bounds the wait for the leader to be reaped after SIGKILL.
	killWait = time.Second
	// drainWait bounds the wait for the last stderr lines once the group is
	// gone; a grandchild that escaped the group could keep the pipe open.
	drainWait = 500 * time.Millisecond
	// groupPoll is how often the group is checked while waiting for it.
	groupPoll = 20 * time.Millisecond
	// stdoutEOFGrace is how long to wait for the exit status after the child
	// closed its stdout, so the error says "exited with status N".
	stdoutEOFGrace = 500 * time.Millisecond
	// stderrLineMax cuts a child's stderr lines so one runaway line cannot
	// flood the log; the rest of such a line is skipped.
	stderrLineMax = 4096
)

// process is a stdio child the Conn owns: its pipes, its process group and
// its exit status.
type process struct {
	log  zerolog.Logger
	cmd  *exec.Cmd
	pgid int

	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout
	stderr *os.File // our end of the child's stderr

	exited chan struct{} // closed once the child was reaped

	stdoutOnce sync.Once // for the first failed read of stdout (EOF, closed)

	// ended is told once why the child ended (see onEnd); endMu guards
	// it and endCause, the cause once known.
	endMu    sync.Mutex
	ended    func(cause error)
	endCause error

	stderrDone chan struct{}
	tail       stderrTail // the last stderr lines, for the exit error

	termOnce sync.Once
}

// startProcess starts cfg.Command in its own process group, with its own
// pipes, in cfg.Cwd, with env; on Linux it gets SIGKILL when the proxy dies
// (children_linux.go).
func startProcess(cfg *config.Server, env []string, log zerolog.Logger) (*process, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}

	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = env
	cmd.Dir = cfg.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = childAttr()
	if err := startChild(cmd); err != nil {
		closeAll()
		return nil, fmt.Errorf("start process: %w", err)
	}
	// The child holds its own copies now; keeping ours would hide its EOF.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()

	p := &process{
		log:        log,
		cmd:        cmd,
		pgid:       cmd.Process.Pid,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	// cmd.Wait is safe here: the pipes are *os.File, so exec starts no copy
	// goroutines and Wait returns as soon as the child is reaped. It is
	// called once the child has exited (awaitExit), so that no OS thread
	// waits in it meanwhile.
	go func() {
		awaitExit(cmd.Process.Pid)
		_ = cmd.Wait()
		ownChildren.forget(p.pgid)
		close(p.exited)
		p.end(exitError(cmd.ProcessState))
	}()
	go func() {
		defer close(p.stderrDone)
		logLines(errR, log, &p.tail)
	}()
	groups.Lock()
	groups.procs[p] = true
	groups.Unlock()
	log.Debug().Int("pid", p.pgid).Msg("process started")
	return p, nil
}

// stdoutReader is the child's stdout with every line bounded by limit (an
// over-long response becomes an error response for its request; any other
// over-long line is dropped and reported to dropped); its EOF is one way
// the child ends (onEnd).
func (p *process) stdoutReader(limit int64, dropped func(error)) lineReader {
	return &eofLines{r: newLineReader(fdmode.Reader(p.stdout), limit, withDropHook(dropped)), done: func() {
		p.stdoutOnce.Do(func() {
			// A child that closes its stdout has ended for the session,
			// whether or not it exits: its exit, if it follows within the
			// grace, says how.
			time.AfterFunc(stdoutEOFGrace, func() { p.end(errStdoutClosed) })
		})
	}}
}

// onEnd has fn told, once, why the child ended for its session: its exit
// (the exit error), or its stdout closing with no exit within
// stdoutEOFGrace (errStdoutClosed); whichever comes first. fn runs on the
// goroutine that saw it (at once if it had been seen already) and may
// block: that goroutine does nothing else. It replaces a goroutine per
// session that waited for the two.
func (p *process) onEnd(fn func(cause error)) {
	p.endMu.Lock()
	p.ended = fn
	cause := p.endCause
	p.endMu.Unlock()
	if cause != nil {
		fn(cause)
	}
}

// end records why the child ended, the first time, and tells onEnd's fn.
func (p *process) end(cause error) {
	p.endMu.Lock()
	if p.endCause != nil {
		p.endMu.Unlock()
		return
	}
	p.endCause = cause
	fn := p.ended
	p.endMu.Unlock()
	if fn != nil {
		fn(cause)
	}
}

// terminate stops the child and everything in its process group: close
// stdin, wait, SIGTERM the group, wait, SIGKILL the group. It returns once the
// group is gone (or the bounded waits ran out) and the pipes are closed.
// Safe to call more than once and after the child exited by itself.
func (p *process) terminate() {
	p.termOnce.Do(func() {
		_ = p.stdin.Close()
		waitClosed(p.exited, stdinGrace)
		if p.groupAlive() {
			p.signalGroup(syscall.SIGTERM)
			deadline := time.Now().Add(termGrace)
			for p.groupAlive() && time.Now().Before(deadline) {
				time.Sleep(groupPoll)
			}
			if p.groupAlive() {
				p.signalGroup(syscall.SIGKILL)
			}
		}
		if !waitClosed(p.exited, killWait) {
			p.log.Error().Int("pid", p.pgid).Msg("process was not reaped after SIGKILL")
		}
		groups.Lock()
		delete(groups.procs, p)
		groups.Unlock()
		waitClosed(p.stderrDone, drainWait)
		_ = p.stdout.Close()
		_ = p.stderr.Close()
		<-p.stderrDone // Close unblocks the reader at once
	})
}

func (p *process) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-p.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn().Err(err).Str("signal", sig.String()).Msg("signal process group")
		return
	}
	p.log.Debug().Str("signal", sig.String()).Msg("signalled process group")
}

// groupAlive reports whether the child or anything else in its process group
// is still running. Zombies do not count: an orphaned grandchild that was
// killed stays a zombie until init reaps it.
func (p *process) groupAlive() bool {
	select {
	case <-p.exited:
	default:
		return true
	}
	if err := syscall.Kill(-p.pgid, 0); err != nil {
		return false // ESRCH: no such group (EPERM: not ours any more)
	}
	alive, ok := liveGroupMembers(p.pgid)
	if !ok {
		return true // no /proc: trust kill(2)
	}
	return alive
}

// liveGroupMembers scans /proc for a process in group pgid that is not a
// zombie. ok is false when /proc cannot be read.
func liveGroupMembers(pgid int) (alive, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		st, ok := parseStat(stat)
		if ok && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			return true, true
		}
	}
	return false, true
}

// procStat is what the proxy reads of /proc/<pid>/stat.
type procStat struct {
	state byte // R, S, D, Z, T, ...
	ppid  int
	pgrp  int
}

// parseStat reads the state, parent and process group fields of
// /proc/<pid>/stat: "pid (comm) S ppid pgrp ...". comm may contain spaces
// and parentheses, so the fields are counted from the last ')'.
func parseStat(stat []byte) (procStat, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procStat{}, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 3 || len(fields[0]) != 1 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(fields[1])
	pgrp, err2 := strconv.Atoi(fields[2])
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: fields[0][0], ppid: ppid, pgrp: pgrp}, true
}

// endErr is why the session of the child ended, cause (its exit status, or
// that it closed its stdout) followed by its last stderr lines. It waits up
// to stderrTailGrace for the lines the child wrote before it ended.
func (p *process) endErr(cause error) error {
	waitClosed(p.stderrDone, stderrTailGrace)
	return p.tail.withTail(cause)
}

// exitError describes how a child ended: "process exited with status 3" or
// "process exited: killed by signal killed".
func exitError(ps *os.ProcessState) error {
	if ps == nil {
		return ErrProcessExited
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Errorf("%w: killed by signal %s", ErrProcessExited, ws.Signal())
	}
	return fmt.Errorf("%w with status %d", ErrProcessExited, ps.ExitCode())
}

// logLines logs every line of r at info, sanitized and cut, and keeps the
// last ones in tail, until r fails.
func logLines(r io.Reader, log zerolog.Logger, tail *stderrTail) {
	br := bufio.NewReaderSize(r, stderrLineMax)
	for {
		line, err := br.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if text := strings.TrimRight(string(line), "\r\n"); strings.TrimSpace(text) != "" {
			if cut {
				text += " [cut]"
			}
			text = sanitize.Text(text)
			log.Info().Str("stream", "stderr").Msg(text)
			tail.add(text)
		}
		for cut { // skip the rest of an over-long line
			_, err = br.ReadSlice('\n')
			cut = errors.Is(err, bufio.ErrBufferFull)
		}
		if err != nil {
			return
		}
	}
}

// waitClosed waits for ch to be closed, at most d; it reports whether it was.
func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// eofLines calls done once, the first time ReadLine fails.
type eofLines struct {
	r    lineReader
	done func()
}

func (e *eofLines) Owned() bool { return e.r.Owned() }

func (e *eofLines) ReadLine() ([]byte, error) {
	line, err := e.r.ReadLine()
	if err != nil {
		e.done()
	}
	return line, err
}
