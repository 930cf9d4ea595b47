package upstream

import (
	"os/exec"
	"sync"
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
