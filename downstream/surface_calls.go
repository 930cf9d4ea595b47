package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// codeResourceNotFound is MCP's error code for an unknown resource.
const codeResourceNotFound = -32002

// uriForm is the form a client wrote a resource URI in; results come back
// in the same form.
type uriForm int

const (
	formNative uriForm = iota + 1 // <server>+<uri>
	formSeed                      // <server>__<uri>
	formBare                      // a prefix "" server's own URI
)

// directHandler answers one request of the resources/prompts surface.
type directHandler func(p *Proxy, ctx context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError)

// directMethods are the methods the wire layer answers itself, from the
// catalog and the upstreams' own bytes, instead of mcp-go's typed
// registries (which would drop fields and could not route by prefix).
var directMethods = map[string]directHandler{
	"resources/list":           (*Proxy).listResources,
	"resources/templates/list": (*Proxy).listTemplates,
	"prompts/list":             (*Proxy).listPrompts,
	"resources/read":           (*Proxy).readResource,
	"resources/subscribe":      (*Proxy).subscribe,
	"resources/unsubscribe":    (*Proxy).unsubscribe,
	"prompts/get":              (*Proxy).getPrompt,
	"completion/complete":      (*Proxy).complete,
}

// listPage answers one page of a merged list with the proxy's own cursors
// (SPEC §7.1): the session's items, listPageSize at a time.
func listPage(member string, items []*itemEntry, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	var mine []*itemEntry
	for _, e := range items {
		if st.agent.Granted(e.Server) {
			mine = append(mine, e)
		}
	}
	whole := joinItems(mine, nil)
	off := 0
	if cursor, err := stringMember(params, "cursor"); err == nil {
		if off, err = decodeCursor(cursor, whole, len(mine)); err != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: err.Error()}
		}
	}
	end := min(off+listPageSize, len(mine))
	out := []byte(`{}`)
	out, _ = rawjson.Set(out, member, joinItems(mine[off:end], nil))
	if end < len(mine) {
		out, _ = rawjson.Set(out, "nextCursor", rawjson.String(encodeCursor(whole, end)))
	}
	return out, nil
}

func (p *Proxy) listResources(_ context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	return listPage("resources", p.Catalog().surface.resources, st, params)
}

func (p *Proxy) listTemplates(_ context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	return listPage("resourceTemplates", p.Catalog().surface.templates, st, params)
}

func (p *Proxy) listPrompts(_ context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	return listPage("prompts", p.Catalog().surface.prompts, st, params)
}

// resourceRoute finds the server of a proxied resource URI (either form,
// SPEC §2) that the session may read.
func (p *Proxy) resourceRoute(st *sessionState, uri string) (srv, orig string, form uriForm, up Upstream, werr *wireError) {
	g := p.gen()
	srv, orig, bare, ok := p.Catalog().surface.route(uri, g.serverNames())
	cfg := g.cfg.Servers[srv]
	if !ok || cfg == nil || !st.agent.Granted(srv) || !cfg.ResourcesEnabled() {
		return "", "", 0, nil, &wireError{Code: codeResourceNotFound, Message: "Resource not found: " + sanitize.Error(uri)}
	}
	up = g.ups[srv]
	if up == nil || !up.Snapshot().Available() {
		return "", "", 0, nil, p.serverDown(srv, up)
	}
	switch {
	case bare:
		form = formBare
	case strings.HasPrefix(uri, namespace.URIPrefix(srv)+"+"):
		form = formNative
	default:
		form = formSeed
	}
	return srv, orig, form, up, nil
}

// uriParam reads params.uri.
func uriParam(params json.RawMessage) (string, *wireError) {
	uri, err := stringMember(params, "uri")
	if err != nil {
		return "", &wireError{Code: codeInvalidParams, Message: "params.uri is required"}
	}
	return uri, nil
}

func (p *Proxy) readResource(ctx context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	uri, werr := uriParam(params)
	if werr != nil {
		return nil, werr
	}
	srv, orig, form, up, werr := p.resourceRoute(st, uri)
	if werr != nil {
		return nil, werr
	}
	out, err := rawjson.Set(params, "uri", rawjson.String(orig))
	if err != nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "invalid params"}
	}
	// In flight to srv, so that a server request it raises over stdio
	// finds this session (relay.go).
	defer p.calls.begin(srv, st)()
	res, werr := p.forward(ctx, srv, up, "resources/read", out)
	if werr != nil {
		return nil, werr
	}
	if form == formBare {
		return compactLines(res), nil
	}
	return wrapContentsURIs(compactLines(res), srv, form == formSeed), nil
}

// forward sends one request upstream within the server's timeout and maps
// its error like a tool call's.
func (p *Proxy) forward(ctx context.Context, srv string, up Upstream, method string, params json.RawMessage) (json.RawMessage, *wireError) {
	cfg := p.gen().cfg.Servers[srv]
	timeout := 120 * time.Second
	if cfg != nil {
		timeout = cfg.Timeout.D()
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	params, _ = hopMeta(params)
	res, err := up.Request(cctx, method, params)
	if err == nil {
		return res, nil
	}
	var rpc *upstream.RPCError
	switch {
	case ctx.Err() != nil:
		return nil, &wireError{Code: codeServerError, Message: "request cancelled"}
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return nil, &wireError{Code: codeTimeout, Message: "MCP server '" + srv + "' did not answer " + method + " within " + timeout.String()}
	case errors.As(err, &rpc):
		return nil, &wireError{Code: rpc.Code, Message: p.errText(rpc.Message), Data: p.errorData(rpc.Data)}
	case errors.Is(err, upstream.ErrNotConnected):
		return nil, p.notSent(srv, err)
	}
	return nil, &wireError{Code: codeServerError, Message: p.errText("MCP server '" + srv + "': " + err.Error())}
}

// subscriptions routes notifications/resources/updated to the sessions
// that subscribed, each with the URI form it used.
type subscriptions struct {
	mu sync.Mutex
	m  map[string]map[*sessionState]string // server NUL uri -> session -> client's uri
}

func subKey(srv, orig string) string { return srv + "\x00" + orig }

func (p *Proxy) subscribe(ctx context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	return p.subscription(ctx, st, params, true)
}

func (p *Proxy) unsubscribe(ctx context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	return p.subscription(ctx, st, params, false)
}

func (p *Proxy) subscription(ctx context.Context, st *sessionState, params json.RawMessage, on bool) (json.RawMessage, *wireError) {
	uri, werr := uriParam(params)
	if werr != nil {
		return nil, werr
	}
	if st.session() == nil {
		return nil, &wireError{Code: codeMethodNotFound, Message: "resources/subscribe needs a session; stateless 2026-07-28 clients subscribe with subscriptions/listen, which the proxy does not relay yet"}
	}
	srv, orig, _, up, werr := p.resourceRoute(st, uri)
	if werr != nil {
		return nil, werr
	}
	if !up.Snapshot().Capabilities.ResourcesSubscribe {
		return nil, &wireError{Code: codeMethodNotFound, Message: "MCP server '" + srv + "' does not support resource subscriptions"}
	}
	method := "resources/unsubscribe"
	if on {
		method = "resources/subscribe"
	}
	out, _ := rawjson.Set(params, "uri", rawjson.String(orig))
	if _, werr := p.forward(ctx, srv, up, method, out); werr != nil {
		return nil, werr
	}
	p.subs.mu.Lock()
	defer p.subs.mu.Unlock()
	if p.subs.m == nil {
		p.subs.m = map[string]map[*sessionState]string{}
	}
	k := subKey(srv, orig)
	if on {
		if p.subs.m[k] == nil {
			p.subs.m[k] = map[*sessionState]string{}
		}
		p.subs.m[k][st] = uri
	} else {
		delete(p.subs.m[k], st)
		if len(p.subs.m[k]) == 0 {
			delete(p.subs.m, k)
		}
	}
	return json.RawMessage(`{}`), nil
}

// dropSubscriptions forgets an ended session's subscriptions, and
// unsubscribes upstream from the resources nobody watches any more.
func (p *Proxy) dropSubscriptions(st *sessionState) {
	p.subs.mu.Lock()
	var gone []string
	for k, subs := range p.subs.m {
		if _, ok := subs[st]; !ok {
			continue
		}
		delete(subs, st)
		if len(subs) == 0 {
			delete(p.subs.m, k)
			gone = append(gone, k)
		}
	}
	p.subs.mu.Unlock()
	for _, k := range gone {
		srv, orig, _ := strings.Cut(k, "\x00")
		if up := p.gen().ups[srv]; up != nil {
			params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(orig))
			go func() { _, _ = p.forward(context.Background(), srv, up, "resources/unsubscribe", params) }()
		}
	}
}

// serverTimeout is a server's configured timeout (120 s when unknown).
func (p *Proxy) serverTimeout(srv string) time.Duration {
	if cfg := p.gen().cfg.Servers[srv]; cfg != nil {
		return cfg.Timeout.D()
	}
	return 120 * time.Second
}

// resourceUpdated forwards an upstream's notifications/resources/updated to
// the sessions subscribed to that resource.
func (p *Proxy) resourceUpdated(srv string, params json.RawMessage) {
	orig, err := stringMember(params, "uri")
	if err != nil {
		return
	}
	p.subs.mu.Lock()
	targets := map[*sessionState]string{}
	for st, uri := range p.subs.m[subKey(srv, orig)] {
		targets[st] = uri
	}
	p.subs.mu.Unlock()
	for st, uri := range targets {
		if sess := st.session(); sess != nil {
			p.notifySession(sess.SessionID(), "notifications/resources/updated", map[string]any{"uri": uri})
		}
	}
}

func (p *Proxy) getPrompt(ctx context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	name, err := stringMember(params, "name")
	if err != nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "params.name is required"}
	}
	e := p.Catalog().surface.byPrompt[name]
	if e == nil || !st.agent.Granted(e.Server) {
		return nil, &wireError{Code: codeInvalidParams, Message: "unknown prompt: " + sanitize.Error(name)}
	}
	up := p.gen().ups[e.Server]
	if up == nil || !up.Snapshot().Available() {
		return nil, p.serverDown(e.Server, up)
	}
	out, _ := rawjson.Set(params, "name", rawjson.String(e.Orig))
	defer p.calls.begin(e.Server, st)() // see readResource
	return p.forward(ctx, e.Server, up, "prompts/get", out)
}

// complete routes completion/complete by its reference: a prompt's exposed
// name or a resource (template) URI.
func (p *Proxy) complete(ctx context.Context, st *sessionState, params json.RawMessage) (json.RawMessage, *wireError) {
	ref, ok, err := rawjson.Get(params, "ref")
	if err != nil || !ok {
		return nil, &wireError{Code: codeInvalidParams, Message: "params.ref is required"}
	}
	kind, _ := stringMember(ref, "type")
	var srv, member, orig string
	switch kind {
	case "ref/prompt":
		name, _ := stringMember(ref, "name")
		e := p.Catalog().surface.byPrompt[name]
		if e == nil || !st.agent.Granted(e.Server) {
			return nil, &wireError{Code: codeInvalidParams, Message: "unknown prompt: " + sanitize.Error(name)}
		}
		srv, member, orig = e.Server, "name", e.Orig
	case "ref/resource":
		uri, _ := stringMember(ref, "uri")
		s, o, _, ok := p.Catalog().surface.route(uri, p.gen().serverNames())
		if cfg := p.gen().cfg.Servers[s]; !ok || cfg == nil || !cfg.ResourcesEnabled() || !st.agent.Granted(s) {
			return nil, &wireError{Code: codeResourceNotFound, Message: "Resource not found: " + sanitize.Error(uri)}
		}
		srv, member, orig = s, "uri", o
	default:
		return nil, &wireError{Code: codeInvalidParams, Message: "params.ref.type must be ref/prompt or ref/resource"}
	}
	up := p.gen().ups[srv]
	if up == nil || !up.Snapshot().Available() {
		return nil, p.serverDown(srv, up)
	}
	if !up.Snapshot().Capabilities.Completions {
		return json.RawMessage(`{"completion":{"values":[]}}`), nil // nothing to complete from
	}
	newRef, _ := rawjson.Set(ref, member, rawjson.String(orig))
	out, _ := rawjson.Set(params, "ref", newRef)
	return p.forward(ctx, srv, up, "completion/complete", out)
}

// notifySession sends a notification to one session, retrying briefly
// while mcp-go's queue for it is full (mcp-go drops it otherwise).
func (p *Proxy) notifySession(sessionID, method string, params map[string]any) {
	for i := 0; i < 50; i++ {
		if err := p.mcp.SendNotificationToSpecificClient(sessionID, method, params); err == nil || !errors.Is(err, errBlocked) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// notifySurfaceChanges sends resources/list_changed and prompts/list_changed
// to every session when the merged lists changed.
func (p *Proxy) notifySurfaceChanges(old, cur *surface) {
	if old == nil {
		return
	}
	if !bytes.Equal(old.resourcesJSON, cur.resourcesJSON) || !bytes.Equal(old.templatesJSON, cur.templatesJSON) {
		p.mcp.SendNotificationToAllClients("notifications/resources/list_changed", nil)
	}
	if !bytes.Equal(old.promptsJSON, cur.promptsJSON) {
		p.mcp.SendNotificationToAllClients("notifications/prompts/list_changed", nil)
	}
}
