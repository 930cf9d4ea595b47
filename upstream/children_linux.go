//go:build linux

package upstream

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
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

// awaitExit returns once the child pid has exited, without reaping it,
// parked on the runtime's poller through a pidfd. cmd.Wait alone holds an
// OS thread in waitid(2) for the child's whole life: one thread per stdio
// server, each with its stacks. Where no pidfd can be had (kernels before
// 5.3) or polled, it returns at once and the caller's Wait blocks as
// before. The pid cannot be reused meanwhile: the child stays a zombie
// until Wait reaps it.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.EINVAL) { // PIDFD_NONBLOCK came with 5.10
		if fd, err = unix.PidfdOpen(pid, 0); err == nil {
			err = unix.SetNonblock(fd, true)
			if err != nil {
				_ = unix.Close(fd)
			}
		}
	}
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer func() { _ = f.Close() }()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd reads as ready once its process has exited.
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			return false
		}
		return err != nil || n > 0
	})
}
