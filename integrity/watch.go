package integrity

import (
	"context"
	"time"
)

// WatchInterval is how often a running proxy looks at its pin files for
// approvals made by `mcp-proxy tools approve` (or files deleted or
// repaired by hand): a stat per pinned server, cheap enough to run every
// two seconds and quick enough that an approved tool is back before the
// operator switches windows.
const WatchInterval = 2 * time.Second

// Watch looks at the pin file of every server Review has seen, every
// interval (0 or less: WatchInterval), until ctx ends. When a file changed
// on disk since the Guard last read or wrote it, the server's last Review
// input is evaluated again, and if the set of held tools (or their
// reasons) changed, changed is called with those servers, sorted: the
// catalog then rebuilds them (calling Review, which returns the new
// verdicts) and sends list_changed where a session's view changed.
// changed is called from Watch's goroutine, without any Guard lock held,
// so it may call Review. Watch returns when ctx is done; its caller owns
// the goroutine and waits for it.
func (g *Guard) Watch(ctx context.Context, interval time.Duration, changed func(servers []string)) {
	if interval <= 0 {
		interval = WatchInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if servers := g.Poll(); len(servers) > 0 && changed != nil {
			changed(servers)
		}
	}
}

// Poll is one round of Watch: it returns the servers whose verdicts
// changed because their pin file changed on disk.
func (g *Guard) Poll() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, name := range g.sortedServers() {
		st := g.servers[name]
		if st.last.Policy.normalized().Pinning == PinOff || g.store.dir == "" {
			continue
		}
		id, err := statID(g.store.Path(name))
		if err == nil && st.loaded && id == st.id {
			continue
		}
		before := st.held
		rev := g.review(*st.last, st.lastPeer)
		if !sameHeld(before, heldSet(rev)) {
			out = append(out, name)
		}
	}
	return out
}
