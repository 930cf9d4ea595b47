//go:build linux

package upstream

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Ending orphans at shutdown: SIGTERM, at most orphanTermGrace (half the
// budget Close is given, if less), then SIGKILL and the rest of the budget,
// at least orphanKillWait, for them to be gone. An orphan that appears
// while this runs (the child of an orphan, re-parented when its parent
// dies) gets the signal of the phase it appears in.
const (
	orphanTermGrace = time.Second
	orphanKillWait  = 200 * time.Millisecond
)

// Reaper makes the proxy the child subreaper of everything its stdio
// servers start (PR_SET_CHILD_SUBREAPER): a grandchild whose parent dies is
// re-parented to the proxy rather than to init, even one that left its
// process group (setsid, a daemonizing server). The Reaper collects the exit
// status of such orphans as they die (no zombies pile up), and Close ends
// the ones still running. The proxy's own children are left to their
// exec.Cmd (children.go), and so is any process in the proxy's own process
// group (a child started elsewhere without a group of its own).
//
// A proxy killed by SIGKILL runs no Close: its stdio servers still get
// SIGKILL from the kernel (children_linux.go), and their children see the
// end of their stdin, but a grandchild that ignores both outlives it.
type Reaper struct {
	log  zerolog.Logger
	self int // the proxy's pid
	pgrp int // the proxy's process group
	sig  chan os.Signal
	stop chan struct{}
	done chan struct{}

	closeOnce sync.Once
}

// StartReaper makes the process a child subreaper and starts collecting
// orphans. Call it once, before the first upstream starts; Close it after
// every upstream closed. If the kernel refuses, it returns a Reaper that
// does nothing, with the error.
func StartReaper(log zerolog.Logger) (*Reaper, error) {
	r := &Reaper{log: log, self: os.Getpid(), pgrp: syscall.Getpgrp(), stop: make(chan struct{}), done: make(chan struct{})}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		close(r.done)
		return r, fmt.Errorf("become child subreaper: %w", err)
	}
	r.sig = make(chan os.Signal, 1)
	signal.Notify(r.sig, syscall.SIGCHLD)
	go r.run()
	return r, nil
}

// run reaps dead orphans whenever a child of the proxy ends.
func (r *Reaper) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.sig:
			r.sweep()
		}
	}
}

// Close ends every orphan still running (SIGTERM, then SIGKILL) and reaps
// them, within budget (or orphanKillWait if that is more). Idempotent; safe
// on a Reaper that does nothing.
func (r *Reaper) Close(budget time.Duration) {
	if r == nil || r.sig == nil {
		return
	}
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		defer signal.Stop(r.sig)
		term := min(orphanTermGrace, budget/2)
		r.end(syscall.SIGTERM, term)
		if left := r.end(syscall.SIGKILL, max(budget-term, orphanKillWait)); left > 0 {
			r.log.Error().Int("orphans", left).Msg("processes left by stdio servers survived SIGKILL")
		}
	})
}

// end sends sig to every running orphan, including those that appear while
// it waits, until none is left or wait passes; it returns how many are left.
func (r *Reaper) end(sig syscall.Signal, wait time.Duration) int {
	signalled := map[int]bool{}
	deadline := time.Now().Add(wait)
	for {
		alive := r.sweep()
		for _, pid := range alive {
			if !signalled[pid] {
				signalled[pid] = true
				if err := syscall.Kill(pid, sig); err == nil {
					r.log.Debug().Int("pid", pid).Str("signal", sig.String()).Msg("signalled a process a stdio server left behind")
				}
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return len(alive)
		}
		time.Sleep(groupPoll)
	}
}

// sweep reaps the orphans that died and returns those still running.
func (r *Reaper) sweep() []int {
	var alive []int
	ownChildren.locked(func(own map[int]bool) {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || own[pid] || pid == r.self {
				continue
			}
			stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue // gone meanwhile
			}
			st, ok := parseStat(stat)
			if !ok || st.ppid != r.self || st.pgrp == r.pgrp {
				continue
			}
			if st.state != 'Z' && st.state != 'X' {
				alive = append(alive, pid)
				continue
			}
			var ws unix.WaitStatus
			if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil && !errors.Is(err, unix.ECHILD) {
				r.log.Debug().Int("pid", pid).Err(err).Msg("reap an orphan")
			}
		}
	})
	return alive
}
