package downstream

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// subscriptions/listen (2026-07-28): a stateless client's stream for the
// notifications no request owns, in place of the GET stream and
// resources/subscribe. The first message is the acknowledgement of what
// the proxy will send; then each notification the client opted in to,
// tagged with the listen request's id as its subscription id, until the
// client closes the request (over HTTP) or cancels it.

// listenFilter is what a listen opted in to.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// allows reports whether the filter takes a notification of method with
// params: a list change it opted in to, or the update of a resource it
// names (as the client wrote the URI).
func (f *listenFilter) allows(method string, params json.RawMessage) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		uri, err := stringMember(params, "uri")
		return err == nil && slices.Contains(f.ResourceSubscriptions, uri)
	}
	return false
}

// listenStream passes the notifications a listen opted in to, tagged with
// its subscription id, to the listen's response stream. Until the listen
// is acknowledged (acknowledge), what it takes waits, at most
// maxListenPending messages: it takes notifications from the moment it is
// registered, before its resources are subscribed to upstream, and none
// may precede the acknowledgement (MCP 2026-07-28,
// basic/patterns/subscriptions).
type listenStream struct {
	out    stream
	id     json.RawMessage
	filter *listenFilter

	mu      sync.Mutex
	acked   bool
	pending [][]byte
}

// maxListenPending bounds what waits for a listen's acknowledgement: the
// upstream subscriptions it waits for take a round trip each, and a
// server flooding notifications meanwhile must not grow the proxy.
const maxListenPending = 256

func (l *listenStream) send(msg []byte) error {
	m, err := rawjson.ParseMessage(msg)
	if err != nil || m.Kind != rawjson.KindNotification || !l.filter.allows(m.Method, m.Params) {
		return nil
	}
	tagged := notification(m.Method, withSubscriptionID(m.Params, l.id))
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.acked {
		if len(l.pending) < maxListenPending {
			l.pending = append(l.pending, tagged)
		}
		return nil
	}
	return l.out.send(tagged)
}

// acknowledge sends the listen's acknowledgement, then what waited for it.
func (l *listenStream) acknowledge(ack []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.out.send(ack)
	for _, msg := range l.pending {
		_ = l.out.send(msg)
	}
	l.acked, l.pending = true, nil
}

// withSubscriptionID sets _meta's subscription id on params (nil: {}).
func withSubscriptionID(params json.RawMessage, id json.RawMessage) []byte {
	if len(params) == 0 || params[0] != '{' {
		params = json.RawMessage(`{}`)
	}
	meta, ok, _ := rawjson.Get(params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		meta = json.RawMessage(`{}`)
	}
	meta, err := rawjson.Set(meta, metaSubscriptionID, id)
	if err != nil {
		return params
	}
	out, err := rawjson.Set(params, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}

// listen serves subscriptions/listen until the client ends it.
func (rp *resourcesPrompts) listen(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	var in struct {
		Notifications listenFilter `json:"notifications"`
	}
	if len(r.params) > 0 && json.Unmarshal(r.params, &in) != nil {
		return nil, errorf(codeInvalidParams, "invalid subscriptions/listen params")
	}
	f := in.Notifications // every list the proxy has changes, and resources can be subscribed to
	f.ResourceSubscriptions = slices.Compact(slices.Sorted(slices.Values(f.ResourceSubscriptions)))

	// The listen takes notifications from here on; they wait for the
	// acknowledgement, sent once its resources are subscribed to.
	s := r.sess
	ls := &listenStream{out: r.out, id: r.id, filter: &f}
	if s.transport == transportHTTP {
		// A stateless HTTP request's session lives as long as this listen:
		// it takes broadcasts, tagged and filtered, on the listen's stream.
		s.notify.attach(ls)
		s.open.Store(true)
		rp.sessions.addListener(s)
		defer rp.sessions.removeListener(s)
	} else {
		// On stdio the connection is shared: a 2026-07-28 client gets the
		// notifications no request owns through its listens only, each
		// tagged with its subscription id (session.sendUnowned).
		s.open.Store(true)
		s.listens.add(ls)
		defer s.listens.remove(ls)
	}
	// The acknowledgement names what the listen will get (MCP 2026-07-28:
	// the subset of the requested notifications the server honours): a
	// resource whose subscription failed upstream is left out.
	honoured := f
	honoured.ResourceSubscriptions = nil
	for _, uri := range f.ResourceSubscriptions {
		params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(uri))
		if _, werr := rp.subscription(ctx, r, params, true); werr != nil {
			rp.log.Debug().Str("agent", s.agent.Name).Str("error", werr.Message).Msg("a listen's resource subscription was not made")
			continue
		}
		honoured.ResourceSubscriptions = append(honoured.ResourceSubscriptions, uri)
	}
	ack, _ := json.Marshal(map[string]any{"notifications": honoured})
	ls.acknowledge(notification("notifications/subscriptions/acknowledged", withSubscriptionID(ack, r.id)))
	select {
	case <-ctx.Done():
	case <-rp.stop:
	case <-s.done:
	case <-s.inputDone:
	}
	if s.transport != transportHTTP {
		for _, uri := range honoured.ResourceSubscriptions {
			params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(uri))
			_, _ = rp.subscription(context.WithoutCancel(ctx), r, params, false)
		}
	}
	return json.RawMessage(`{"_meta":{` + string(rawjson.String(metaSubscriptionID)) + `:` + string(r.id) + `}}`), nil
}

// listenSet is the subscriptions/listen requests open on a stdio
// connection. Safe for concurrent use.
type listenSet struct {
	mu sync.Mutex
	ls []*listenStream
}

func (l *listenSet) add(ls *listenStream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ls = append(l.ls, ls)
}

func (l *listenSet) remove(ls *listenStream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ls = slices.DeleteFunc(l.ls, func(x *listenStream) bool { return x == ls })
}

// send passes msg to every listen that takes it.
func (l *listenSet) send(msg []byte) {
	l.mu.Lock()
	ls := slices.Clone(l.ls)
	l.mu.Unlock()
	for _, x := range ls {
		_ = x.send(msg)
	}
}
