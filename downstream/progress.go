package downstream

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Progress relay (docs/protocol.md#requests-from-servers). A call's progress token is replaced upstream by
// one of the proxy's own ("px-progress-<hex>"), so that two sessions using
// the same token never mix; notifications come back with the client's
// token, written on the stream of the call's request, ahead of its
// response. Each call has one sender, so a slow client never holds up the
// upstream's reader: a value that arrives while an earlier one is still
// being written replaces it (intermediate values may be coalesced, order
// is kept, and the last one goes out before the call's response).

// progressFlushLimit bounds how long a call's response waits for its last
// progress notification to be written.
const progressFlushLimit = 2 * time.Second

type progressRelay struct {
	mu     sync.Mutex
	routes map[string]*progressRoute
}

// progressRoute carries one call's progress to its client.
type progressRoute struct {
	relay  *progressRelay
	key    string
	server string // only this upstream's notifications reach the route

	mu       sync.Mutex
	out      stream          // the stream of the request waiting on the call
	token    json.RawMessage // that request's progress token, as it wrote it
	latest   json.RawMessage // the newest params not yet written
	sending  bool
	closed   bool
	detached bool          // no request is waiting on the call (a parked round trip, roundtrip.go)
	idle     chan struct{} // closed when the sender has nothing left
}

// open rewrites meta's progress token for the upstream and registers the
// route to r's stream. With no token it returns meta and a nil route.
func (pr *progressRelay) open(r *request, serverName string, meta json.RawMessage) (json.RawMessage, *progressRoute) {
	token := progressTokenOf(meta)
	if token == nil {
		return meta, nil
	}
	key := "px-progress-" + randid.Hex(12)
	out, err := rawjson.Set(meta, "progressToken", rawjson.String(key))
	if err != nil {
		return meta, nil
	}
	route := &progressRoute{relay: pr, key: key, server: serverName, out: r.out, token: token}
	pr.mu.Lock()
	if pr.routes == nil {
		pr.routes = map[string]*progressRoute{}
	}
	pr.routes[key] = route
	pr.mu.Unlock()
	return out, route
}

// progressTokenOf is the progressToken of a request's _meta (a string or a
// number, as written), or nil.
func progressTokenOf(meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 || !bytes.Contains(meta, []byte("progressToken")) {
		return nil
	}
	tok, ok, err := rawjson.Get(meta, "progressToken")
	if err != nil || !ok || len(tok) == 0 || (tok[0] != '"' && tok[0] != '-' && (tok[0] < '0' || tok[0] > '9')) {
		return nil
	}
	return tok
}

// deliver routes one notifications/progress of upstream srv.
func (pr *progressRelay) deliver(srv string, params json.RawMessage) {
	key, err := stringMember(params, "progressToken")
	if err != nil {
		return
	}
	pr.mu.Lock()
	route := pr.routes[key]
	pr.mu.Unlock()
	if route == nil || route.server != srv {
		return // a late notification, or another server's guess
	}
	route.push(params)
}

func (rt *progressRoute) push(params json.RawMessage) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return // the call has answered; its stream may be gone
	}
	rt.latest = append(rt.latest[:0:0], params...) // the upstream's buffer is reused
	rt.startLocked()
}

// startLocked starts the sender when a value waits and a request can take it.
func (rt *progressRoute) startLocked() {
	if !rt.sending && !rt.detached && rt.latest != nil {
		rt.sending = true
		rt.idle = make(chan struct{})
		go rt.send()
	}
}

// send writes the latest value until none is left or the route detaches.
func (rt *progressRoute) send() {
	for {
		rt.mu.Lock()
		params := rt.latest
		if params == nil || rt.detached {
			rt.sending = false
			close(rt.idle)
			rt.mu.Unlock()
			return
		}
		rt.latest = nil
		out, token := rt.out, rt.token
		rt.mu.Unlock()
		if withToken, err := rawjson.Set(params, "progressToken", token); err == nil {
			_ = out.send(notification("notifications/progress", withToken))
		}
	}
}

// detach stops delivery, keeping the latest value, and returns once nothing
// is being written to the request that is about to end. A nil route is a
// no-op.
func (rt *progressRoute) detach() {
	if rt == nil {
		return
	}
	if idle := rt.stop(&rt.detached); idle != nil {
		<-idle // the sender stops after the value in hand; a write is bounded by its stream
	}
}

// stop sets flag under the lock: rt.detached, which stops the sender after
// the value in hand, or rt.closed, after which it writes the latest value
// and takes no more. It returns what is closed once the sender has
// stopped: nil when none runs.
func (rt *progressRoute) stop(flag *bool) <-chan struct{} {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	*flag = true
	if !rt.sending {
		return nil
	}
	return rt.idle
}

// attach resumes delivery to another request of the same call: its stream
// and progress token (nil: that request asked for no progress, so none is
// sent).
func (rt *progressRoute) attach(out stream, token json.RawMessage) {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.out, rt.token = out, token
	if token == nil || rt.closed {
		return // stays detached; a closed route's call has its outcome and sends nothing more
	}
	rt.detached = false
	rt.startLocked()
}

// close waits (bounded) for the last value to be written, then drops the
// route. A nil route is a no-op.
func (rt *progressRoute) close() {
	if rt == nil {
		return
	}
	if idle := rt.stop(&rt.closed); idle != nil {
		select {
		case <-idle:
		case <-time.After(progressFlushLimit):
		}
	}
	rt.relay.mu.Lock()
	delete(rt.relay.routes, rt.key)
	rt.relay.mu.Unlock()
}
