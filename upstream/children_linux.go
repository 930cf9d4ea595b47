//go:build linux

package upstream

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Linux gives stdio children a parent-death signal: SIGKILL when the proxy
// dies, however it dies (SIGKILL included), so no server outlives it. The
// kernel sends that signal when the *thread* that forked the child ends,
// not the process, and the Go runtime ends an OS thread when a goroutine
// locked to it exits. So every child is started from one goroutine locked
// to its thread for the life of the process (the spawner), whose thread
// therefore ends only with the process.

// spawnCall is one child to start on the spawner's thread.
type spawnCall struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce  sync.Once
	spawnCalls chan spawnCall
)

// childAttr is the SysProcAttr of a stdio child: its own process group (so
// its whole group can be signalled) and the parent-death signal.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startChild starts cmd on the spawner's thread and records it as a child
// of the proxy's own (children.go) before anything else can see it exit.
func startChild(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCalls = make(chan spawnCall)
		// The spawner lives as long as the process, on purpose: its
		// thread must never end while a child it started runs.
		go spawner()
	})
	done := make(chan error, 1)
	spawnCalls <- spawnCall{cmd: cmd, done: done}
	return <-done
}

func spawner() {
	runtime.LockOSThread() // never unlocked: see the comment at the top
	for c := range spawnCalls {
		c.done <- ownChildren.start(c.cmd)
	}
}
