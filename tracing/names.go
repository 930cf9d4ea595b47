package tracing

import "sync"

// Bounds of the span name cache.
const (
	// maxNames is how many span names a Tracer keeps: the tools and
	// prompts of a large fleet, under a megabyte. A name past it drops
	// the names kept and starts them again: the targets are the clients'
	// (a tool that does not exist gets its span too), and names kept for
	// good would let one client's made-up names leave every later tool's
	// name built for each span.
	maxNames = 4096
	// maxNameTarget is the longest target whose name is kept: the MCP
	// specification's limit on a tool name (128), so a client's made-up
	// name of megabytes is never held.
	maxNameTarget = 128
)

// spanNames keeps the span names of the targets seen ("tools/call
// fx__echo"), so that a call's two spans do not each build theirs; the
// same few tools are called again and again. Safe for concurrent use.
type spanNames struct {
	mu sync.RWMutex
	m  map[nameKey]string
}

type nameKey struct{ method, target string }

// name is the span name of method and target: "<method> <target>", or
// method alone when target is "".
func (c *spanNames) name(method, target string) string {
	if target == "" {
		return method
	}
	k := nameKey{method, target}
	c.mu.RLock()
	n, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return n
	}
	n = method + " " + target
	if len(target) > maxNameTarget {
		return n
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[nameKey]string)
	}
	if len(c.m) >= maxNames {
		clear(c.m)
	}
	// The key's strings are the name's own: the caller's (a request's
	// bytes) are not kept.
	k = nameKey{n[:len(method)], n[len(method)+1:]}
	c.m[k] = n
	c.mu.Unlock()
	return n
}
