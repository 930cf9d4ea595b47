package downstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Progress relay (SPEC §10). A call's progress token is replaced upstream by
// one of the proxy's own ("px-progress-<n>"), so that two sessions using
// the same token never mix; notifications come back with the client's token.
// mcp-go drops a notification when a session's queue is full, so each call
// has one sender that retries, and a value that arrives while an earlier one
// is still waiting replaces it: intermediate values may be coalesced, order
// is kept, and the last one is delivered before the call's response.

// progressFlushLimit bounds how long a call's response waits for its last
// progress notification to be handed to the client.
const progressFlushLimit = 2 * time.Second

// progressRetry is the pause between attempts while a session's
// notification queue is full.
const progressRetry = 2 * time.Millisecond

type progressRelay struct {
	p      *Proxy
	mu     sync.Mutex
	routes map[string]*progressRoute
}

// directKey carries a call's direct writer (pending.direct) in its context.
type directKey struct{}

// progressRoute carries one call's progress to its client.
type progressRoute struct {
	relay  *progressRelay
	key    string
	server string          // only this upstream's notifications reach the route
	ctx    context.Context // the call's context: it carries the session
	direct func([]byte)    // write in order with the call's response (stdio), or nil
	token  any             // the client's token, as decoded (json.Number kept)

	mu       sync.Mutex
	latest   map[string]any
	sending  bool
	closed   bool
	detached bool          // no request is waiting on the call (a parked round trip, mrtr.go)
	idle     chan struct{} // closed when the sender has nothing left
}

// open rewrites meta's progress token for the upstream and registers the
// route. With no token it returns meta and a nil route.
func (r *progressRelay) open(ctx context.Context, serverName string, meta json.RawMessage) (json.RawMessage, *progressRoute) {
	if len(meta) == 0 || !bytes.Contains(meta, []byte("progressToken")) {
		return meta, nil
	}
	raw, ok, err := rawjson.Get(meta, "progressToken")
	if err != nil || !ok {
		return meta, nil
	}
	token, err := decodeNumberKept(raw)
	if err != nil || token == nil {
		return meta, nil
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	key := "px-progress-" + hex.EncodeToString(b[:])
	r.mu.Lock()
	route := &progressRoute{relay: r, key: key, ctx: ctx, token: token, server: serverName}
	route.direct, _ = ctx.Value(directKey{}).(func([]byte))
	if r.routes == nil {
		r.routes = map[string]*progressRoute{}
	}
	r.routes[key] = route
	r.mu.Unlock()
	out, err := rawjson.Set(meta, "progressToken", rawjson.String(key))
	if err != nil {
		route.close()
		return meta, nil
	}
	return out, route
}

// deliver routes one notifications/progress of upstream srv.
func (r *progressRelay) deliver(srv string, params json.RawMessage) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return
	}
	key, _ := m["progressToken"].(string)
	r.mu.Lock()
	route := r.routes[key]
	r.mu.Unlock()
	if route == nil || route.server != srv {
		return // a late notification, or another server's guess
	}
	route.push(m)
}

func (rt *progressRoute) push(m map[string]any) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return // the call has answered; its stream may be gone
	}
	rt.latest = m
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

// detach stops delivery, keeping the latest value, and returns once nothing
// is being written to the request that is about to end. A nil route is a
// no-op.
func (rt *progressRoute) detach() {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	rt.detached = true
	idle, sending := rt.idle, rt.sending
	rt.mu.Unlock()
	if sending {
		<-idle // the sender stops after the value in hand; a write is bounded by its stream
	}
}

// attach resumes delivery to another request of the same call: its
// context, direct writer and progress token (nil: that request asked for no
// progress, so none is sent).
func (rt *progressRoute) attach(ctx context.Context, direct func([]byte), token any) {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.ctx, rt.direct, rt.token = ctx, direct, token
	if token == nil || rt.closed {
		return // stays detached; a closed route's call has its outcome and sends nothing more
	}
	rt.detached = false
	rt.startLocked()
}

// send delivers the latest value until none is left or the route detaches.
func (rt *progressRoute) send() {
	for {
		rt.mu.Lock()
		m := rt.latest
		if m == nil || rt.detached {
			rt.sending = false
			close(rt.idle)
			rt.mu.Unlock()
			return
		}
		rt.latest = nil
		ctx, direct := rt.ctx, rt.direct
		m["progressToken"] = rt.token
		rt.mu.Unlock()
		if direct != nil {
			// Written by the proxy itself, so it precedes the response.
			if b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcp.MethodNotificationProgress, "params": m}); err == nil {
				direct(b)
			}
			continue
		}
		for {
			err := rt.relay.p.mcp.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), m)
			if !errors.Is(err, server.ErrNotificationChannelBlocked) || ctx.Err() != nil {
				break
			}
			time.Sleep(progressRetry)
			rt.mu.Lock()
			newer := rt.latest != nil
			rt.mu.Unlock()
			if newer {
				break // coalesce: the newer value replaces this one
			}
		}
	}
}

// close waits (bounded) for the last value to be handed over, then drops
// the route. A nil route is a no-op.
func (rt *progressRoute) close() {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	rt.closed = true
	idle, sending := rt.idle, rt.sending
	rt.mu.Unlock()
	if sending {
		select {
		case <-idle:
		case <-time.After(progressFlushLimit):
		}
	}
	rt.relay.mu.Lock()
	delete(rt.relay.routes, rt.key)
	rt.relay.mu.Unlock()
}

// decodeNumberKept decodes a JSON value keeping numbers exact.
func decodeNumberKept(raw json.RawMessage) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	err := dec.Decode(&v)
	return v, err
}
