//go:build !linux

package upstream

import (
	"os/exec"
	"syscall"
)

// childAttr is the SysProcAttr of a stdio child: its own process group, so
// that its whole group can be signalled. Only Linux has a parent-death
// signal (children_linux.go).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// startChild starts cmd and records it as a child of the proxy's own.
func startChild(cmd *exec.Cmd) error { return ownChildren.start(cmd) }

// awaitExit returns at once: the caller's Wait waits for the child.
func awaitExit(int) {}
