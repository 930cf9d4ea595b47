package integrity

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// WatchInterval is how often a running proxy looks at its pin files for
// approvals made by `mcp-proxy tools approve` (or files deleted or
// repaired by hand): a stat per pinned server, cheap enough to run every
// two seconds and quick enough that an approved tool is back before the
// operator switches windows.
const WatchInterval = 2 * time.Second

// SharedWatchInterval is the longest Watch waits between two looks at
// pins kept in the shared store, where each look is a round trip per
// pinning server: short enough that an approval whose announcement was
// lost still reaches every replica within 2 s (docs/shared-state.md).
const SharedWatchInterval = time.Second

// sharedWatchCap is SharedWatchInterval; tests lengthen it to see the
// announcements alone at work.
var sharedWatchCap = SharedWatchInterval

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
//
// With the pins in the shared store, an approval made on another replica
// (or by the CLI) is announced on a Redis channel, and Watch polls at
// once. Redis pub/sub drops what is published while a subscriber
// reconnects, so Watch also polls every SharedWatchInterval at most: a
// lost announcement is caught up within it. A Redis stream would not
// lose it, but would add a consumer's position to keep per replica, for
// a message that carries nothing the poll does not read anyway: the
// revisions in the store are the truth, the announcement only says when
// to look.
func (g *Guard) Watch(ctx context.Context, interval time.Duration, changed func(servers []string)) {
	if interval <= 0 {
		interval = WatchInterval
	}
	var nudges <-chan *redis.Message
	if sp := g.store.shared; sp != nil {
		interval = min(interval, sharedWatchCap)
		var stop func()
		nudges, stop = sp.subscribe(ctx)
		defer stop()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-nudges:
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
		if st.last.Policy.normalized().Pinning == PinOff || !g.store.enabled() {
			continue
		}
		id, err := g.store.stat(name)
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
