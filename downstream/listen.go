package downstream

import (
	"context"
	"encoding/json"
	"slices"

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

// allows reports whether the filter takes a notification of method.
func (f *listenFilter) allows(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		return len(f.ResourceSubscriptions) > 0 // only subscribed URIs are ever sent
	}
	return false
}

// listenStream passes the notifications a listen opted in to, tagged with
// its subscription id, to the listen's response stream.
type listenStream struct {
	out    stream
	id     json.RawMessage
	filter *listenFilter
}

func (l *listenStream) send(msg []byte) error {
	m, err := rawjson.ParseMessage(msg)
	if err != nil || m.Kind != rawjson.KindNotification || !l.filter.allows(m.Method) {
		return nil
	}
	return l.out.send(notification(m.Method, withSubscriptionID(m.Params, l.id)))
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
	ack, _ := json.Marshal(map[string]any{"notifications": f})
	_ = r.out.send(notification("notifications/subscriptions/acknowledged", withSubscriptionID(ack, r.id)))

	s := r.sess
	if s.transport == transportHTTP {
		// A stateless HTTP request's session lives as long as this listen:
		// it takes broadcasts, tagged and filtered, on the listen's stream.
		s.notify.attach(&listenStream{out: r.out, id: r.id, filter: &f})
		s.open.Store(true)
		rp.sessions.addListener(s)
		defer rp.sessions.removeListener(s)
	} // on stdio the connection takes every notification already, as it comes
	for _, uri := range f.ResourceSubscriptions {
		params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(uri))
		if _, werr := rp.subscription(ctx, r, params, true); werr != nil {
			rp.log.Debug().Str("agent", s.agent.Name).Str("error", werr.Message).Msg("a listen's resource subscription was not made")
		}
	}
	select {
	case <-ctx.Done():
	case <-rp.stop:
	case <-s.done:
	case <-s.inputDone:
	}
	if s.transport != transportHTTP {
		for _, uri := range f.ResourceSubscriptions {
			params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(uri))
			_, _ = rp.subscription(context.WithoutCancel(ctx), r, params, false)
		}
	}
	return json.RawMessage(`{"_meta":{` + string(rawjson.String(metaSubscriptionID)) + `:` + string(r.id) + `}}`), nil
}
