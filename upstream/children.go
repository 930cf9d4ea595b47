package upstream

import (
	"os/exec"
	"sync"
	"syscall"
)

// children are the processes the proxy started itself (its stdio servers)
// and still has to wait for. The orphan reaper (reaper_linux.go) leaves
// them alone: their exit status belongs to their exec.Cmd.Wait.
type children struct {
	mu   sync.Mutex // held across Start, so no scan sees a child unrecorded
	pids map[int]bool
}

// ownChildren is process-wide: children, like the reaper, belong to the
// process, not to one Conn.
var ownChildren = &children{pids: map[int]bool{}}

// start starts cmd and records its pid.
func (c *children) start(cmd *exec.Cmd) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	c.pids[cmd.Process.Pid] = true
	return nil
}

// forget drops a child once its Wait has returned.
func (c *children) forget(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pids, pid)
}

// locked calls fn with the lock held and the set of recorded pids: fn may
// reap processes not in it without racing a Start.
func (c *children) locked(fn func(own map[int]bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.pids)
}

// groups are the stdio children whose process groups have not been ended
// yet: registered when the child starts, dropped when terminate is done
// with it. KillGroups ends what is left of them.
var groups = struct {
	sync.Mutex
	procs map[*process]bool
}{procs: map[*process]bool{}}

// KillGroups sends SIGKILL to the process group of every stdio server still
// being closed, at once. A shutdown calls it when its budget for closing
// the upstreams ran out (docs/operations.md#child-processes-linux): a server that ignores its stdin's end
// and SIGTERM would otherwise meet its SIGKILL only after the proxy has
// exited, and what it started in its group (npx's real server) would
// survive it.
func KillGroups() {
	groups.Lock()
	procs := make([]*process, 0, len(groups.procs))
	for p := range groups.procs {
		procs = append(procs, p)
	}
	groups.Unlock()
	for _, p := range procs {
		if p.groupAlive() {
			p.signalGroup(syscall.SIGKILL)
		}
	}
}
