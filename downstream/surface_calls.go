package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// uriForm is the form a client wrote a resource URI in; results come back
// in the same form.
type uriForm int

const (
	formNative uriForm = iota + 1 // <server>+<uri>
	formSeed                      // <server>__<uri>
	formBare                      // a prefix "" server's own URI
)

// listPage answers one page of a merged list with the proxy's own cursors
// (docs/resources.md#resources-and-prompts): the session's items, listPageSize at a time.
func listPage(member string, items []*itemEntry, st *session, params json.RawMessage) (json.RawMessage, *wireError) {
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

func (p *Proxy) listResources(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	p.waitStartup(ctx) // like tools/list (docs/operations.md#startup)
	return listPage("resources", p.Catalog().surface.resources, r.sess, r.params)
}

func (p *Proxy) listTemplates(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	p.waitStartup(ctx) // like tools/list (docs/operations.md#startup)
	return listPage("resourceTemplates", p.Catalog().surface.templates, r.sess, r.params)
}

func (p *Proxy) listPrompts(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	p.waitStartup(ctx) // like tools/list (docs/operations.md#startup)
	return listPage("prompts", p.Catalog().surface.prompts, r.sess, r.params)
}

// resourceRoute finds the server of a proxied resource URI (either form,
// docs/agents.md#names) that the session may read.
func (p *Proxy) resourceRoute(ctx context.Context, st *session, uri string) (srv, orig string, form uriForm, up Upstream, werr *wireError) {
	g := p.gen()
	srv, orig, bare, ok := p.routeURI(ctx, uri)
	cfg := g.cfg.Servers[srv]
	if !ok || cfg == nil || !st.agent.Granted(srv) || !cfg.ResourcesEnabled() {
		return "", "", 0, nil, &wireError{Code: codeResourceNotFound, Message: "Resource not found: " + sanitize.Error(uri)}
	}
	if werr := p.serverUp(srv); werr != nil {
		return "", "", 0, nil, werr
	}
	up = g.ups[srv]
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

// awaitFirstConnection waits, while up's first connection is under way,
// for it to end, at most until the startup deadline (upstream.Snapshot
// StartupUntil) or ctx: a capability check must not read the empty
// capabilities of a server that is still connecting. Request waits the same
// way for the requests it sends.
func awaitFirstConnection(ctx context.Context, up Upstream) {
	s := up.Snapshot()
	if s.State == upstream.StateConnected || s.StartupUntil.IsZero() {
		return
	}
	t := time.NewTimer(time.Until(s.StartupUntil))
	defer t.Stop()
	select {
	case <-up.Ready():
	case <-t.C:
	case <-ctx.Done():
	}
}

// uriParam reads params.uri.
func uriParam(params json.RawMessage) (string, *wireError) {
	uri, err := stringMember(params, "uri")
	if err != nil {
		return "", &wireError{Code: codeInvalidParams, Message: "params.uri is required"}
	}
	return uri, nil
}

// readResource answers resources/read; a stateless HTTP client's read runs
// as a parked call, so that a server request it raises reaches the client
// (mrtr.go).
func (p *Proxy) readResource(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	if parkable(r) {
		return p.surfaceRoundTrip(ctx, r, p.readResourceNow)
	}
	return p.readResourceNow(ctx, r)
}

func (p *Proxy) readResourceNow(ctx context.Context, r *request) (_ json.RawMessage, werr *wireError) {
	st, params := r.sess, r.params
	uri, werr := uriParam(params)
	if werr != nil {
		return nil, werr
	}
	srv := ""
	defer p.auditSurface(ctx, r, uri, &srv, time.Now(), &werr)
	srv, orig, form, up, werr := p.resourceRoute(ctx, st, uri)
	if werr != nil {
		return nil, werr
	}
	out, err := rawjson.Set(params, "uri", rawjson.String(orig))
	if err != nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "invalid params"}
	}
	// In flight to srv, so that a server request it raises over stdio
	// finds this client (relay.go).
	defer p.relay.calls.begin(srv, r)()
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
	if hop, err := hopParams(params); err == nil {
		params = hop
	}
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
	case invalidResult(err):
		return nil, errorf(codeInternal, "%s", p.errText(err.Error()))
	case errors.Is(err, upstream.ErrNeedsAuth):
		return nil, needsAuth(srv, p.errText(err.Error()))
	case errors.Is(err, upstream.ErrNotConnected):
		return nil, p.notSent(srv, err)
	}
	return nil, &wireError{Code: codeServerError, Message: p.errText("MCP server '" + srv + "': " + err.Error())}
}

// subscriptions routes notifications/resources/updated to the sessions
// that subscribed, each with the URI form it used.
type subscriptions struct {
	mu sync.Mutex
	m  map[string]map[*session]string // server NUL uri -> session -> client's uri
}

func subKey(srv, orig string) string { return srv + "\x00" + orig }

func (p *Proxy) subscribe(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	return p.subscription(ctx, r.sess, r.params, true)
}

func (p *Proxy) unsubscribe(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	return p.subscription(ctx, r.sess, r.params, false)
}

func (p *Proxy) subscription(ctx context.Context, st *session, params json.RawMessage, on bool) (json.RawMessage, *wireError) {
	uri, werr := uriParam(params)
	if werr != nil {
		return nil, werr
	}
	srv, orig, _, up, werr := p.resourceRoute(ctx, st, uri)
	if werr != nil {
		return nil, werr
	}
	awaitFirstConnection(ctx, up)
	if !up.Snapshot().Capabilities.ResourcesSubscribe {
		return nil, &wireError{Code: codeMethodNotFound, Message: "MCP server '" + srv + "' does not support resource subscriptions"}
	}
	out, _ := rawjson.Set(params, "uri", rawjson.String(orig))
	k := subKey(srv, orig)
	subs := &p.relay.subs
	if !on {
		// The upstream holds one subscription for every session watching
		// the resource: it is ended only when the last of them leaves.
		subs.mu.Lock()
		delete(subs.m[k], st)
		last := len(subs.m[k]) == 0
		if last {
			delete(subs.m, k)
		}
		subs.mu.Unlock()
		if last {
			if _, werr := p.forward(ctx, srv, up, "resources/unsubscribe", out); werr != nil {
				return nil, werr
			}
		}
		return json.RawMessage(`{}`), nil
	}
	if _, werr := p.forward(ctx, srv, up, "resources/subscribe", out); werr != nil {
		return nil, werr
	}
	subs.mu.Lock()
	defer subs.mu.Unlock()
	if subs.m == nil {
		subs.m = map[string]map[*session]string{}
	}
	if subs.m[k] == nil {
		subs.m[k] = map[*session]string{}
	}
	subs.m[k][st] = uri
	return json.RawMessage(`{}`), nil
}

// dropSubscriptions forgets an ended session's subscriptions, and
// unsubscribes upstream from the resources nobody watches any more.
func (p *Proxy) dropSubscriptions(st *session) {
	p.relay.subs.mu.Lock()
	var gone []string
	for k, subs := range p.relay.subs.m {
		if _, ok := subs[st]; !ok {
			continue
		}
		delete(subs, st)
		if len(subs) == 0 {
			delete(p.relay.subs.m, k)
			gone = append(gone, k)
		}
	}
	p.relay.subs.mu.Unlock()
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
	p.relay.subs.mu.Lock()
	targets := map[*session]string{}
	for st, uri := range p.relay.subs.m[subKey(srv, orig)] {
		targets[st] = uri
	}
	p.relay.subs.mu.Unlock()
	for st, uri := range targets {
		st.notify.send(notification("notifications/resources/updated", []byte(`{"uri":`+string(rawjson.String(uri))+`}`)))
	}
}

// getPrompt answers prompts/get; like readResource, a stateless HTTP
// client's runs as a parked call.
func (p *Proxy) getPrompt(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	if parkable(r) {
		return p.surfaceRoundTrip(ctx, r, p.getPromptNow)
	}
	return p.getPromptNow(ctx, r)
}

func (p *Proxy) getPromptNow(ctx context.Context, r *request) (_ json.RawMessage, werr *wireError) {
	st, params := r.sess, r.params
	name, err := stringMember(params, "name")
	if err != nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "params.name is required"}
	}
	srv := ""
	defer p.auditSurface(ctx, r, name, &srv, time.Now(), &werr)
	e := p.promptEntry(ctx, name)
	if e == nil || !st.agent.Granted(e.Server) {
		return nil, &wireError{Code: codeInvalidParams, Message: "unknown prompt: " + sanitize.Error(name)}
	}
	srv = e.Server
	if werr := p.serverUp(e.Server); werr != nil {
		return nil, werr
	}
	up := p.gen().ups[e.Server]
	out, _ := rawjson.Set(params, "name", rawjson.String(e.Orig))
	defer p.relay.calls.begin(e.Server, r)() // see readResource
	return p.forward(ctx, e.Server, up, "prompts/get", out)
}

// routeURI is surface.route of the current catalog, once it has caught up
// when the catalog routes uri nowhere (catchUp): a bare URI's server may
// be unknown only because it is still making its first connection.
func (p *Proxy) routeURI(ctx context.Context, uri string) (srv, orig string, bare, ok bool) {
	route := func(c *Catalog) bool {
		srv, orig, bare, ok = c.surface.route(uri, p.gen().serverNames())
		return ok
	}
	p.catchUp(ctx, route)
	if !ok {
		route(p.Catalog())
	}
	return srv, orig, bare, ok
}

// promptEntry returns the prompt exposed as name, or nil. A name the
// catalog does not know is looked up again once the catalog has caught up
// (catchUp): it may be unknown only because its server is still making its
// first connection.
func (p *Proxy) promptEntry(ctx context.Context, name string) *itemEntry {
	p.catchUp(ctx, func(c *Catalog) bool { return c.surface.byPrompt[name] != nil })
	return p.Catalog().surface.byPrompt[name]
}

// complete routes completion/complete by its reference: a prompt's exposed
// name or a resource (template) URI.
func (p *Proxy) complete(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	st, params := r.sess, r.params
	ref, ok, err := rawjson.Get(params, "ref")
	if err != nil || !ok {
		return nil, &wireError{Code: codeInvalidParams, Message: "params.ref is required"}
	}
	kind, _ := stringMember(ref, "type")
	var srv, member, orig string
	switch kind {
	case "ref/prompt":
		name, _ := stringMember(ref, "name")
		e := p.promptEntry(ctx, name)
		if e == nil || !st.agent.Granted(e.Server) {
			return nil, &wireError{Code: codeInvalidParams, Message: "unknown prompt: " + sanitize.Error(name)}
		}
		srv, member, orig = e.Server, "name", e.Orig
	case "ref/resource":
		uri, _ := stringMember(ref, "uri")
		s, o, _, ok := p.routeURI(ctx, uri)
		if cfg := p.gen().cfg.Servers[s]; !ok || cfg == nil || !cfg.ResourcesEnabled() || !st.agent.Granted(s) {
			return nil, &wireError{Code: codeResourceNotFound, Message: "Resource not found: " + sanitize.Error(uri)}
		}
		srv, member, orig = s, "uri", o
	default:
		return nil, &wireError{Code: codeInvalidParams, Message: "params.ref.type must be ref/prompt or ref/resource"}
	}
	if werr := p.serverUp(srv); werr != nil {
		return nil, werr
	}
	up := p.gen().ups[srv]
	awaitFirstConnection(ctx, up)
	if !up.Snapshot().Capabilities.Completions {
		return json.RawMessage(`{"completion":{"values":[]}}`), nil // nothing to complete from
	}
	newRef, _ := rawjson.Set(ref, member, rawjson.String(orig))
	out, _ := rawjson.Set(params, "ref", newRef)
	return p.forward(ctx, srv, up, "completion/complete", out)
}

// notifySurfaceChanges sends resources/list_changed and prompts/list_changed
// when the merged lists changed, to the sessions granted a server whose
// items changed: the others' lists did not (docs/resources.md#resources-and-prompts).
func (p *Proxy) notifySurfaceChanges(old, cur *surface) {
	if old == nil {
		return
	}
	if !bytes.Equal(old.resourcesJSON, cur.resourcesJSON) || !bytes.Equal(old.templatesJSON, cur.templatesJSON) {
		changed := changedServers(old.resources, cur.resources)
		maps.Copy(changed, changedServers(old.templates, cur.templates))
		p.broadcast("notifications/resources/list_changed", nil, grantedAny(changed))
	}
	if !bytes.Equal(old.promptsJSON, cur.promptsJSON) {
		p.broadcast("notifications/prompts/list_changed", nil, grantedAny(changedServers(old.prompts, cur.prompts)))
	}
}

// changedServers are the servers whose items differ between a and b.
func changedServers(a, b []*itemEntry) map[string]bool {
	byServer := func(list []*itemEntry) map[string][]byte {
		m := map[string][]byte{}
		for _, e := range list {
			m[e.Server] = append(append(m[e.Server], e.Raw...), 0)
		}
		return m
	}
	pa, pb := byServer(a), byServer(b)
	out := map[string]bool{}
	for _, pair := range [][2]map[string][]byte{{pa, pb}, {pb, pa}} {
		for srv, items := range pair[0] {
			if !bytes.Equal(items, pair[1][srv]) {
				out[srv] = true
			}
		}
	}
	return out
}

// grantedAny keeps the sessions whose agent is granted one of servers.
func grantedAny(servers map[string]bool) func(*session) bool {
	return func(s *session) bool {
		for srv := range servers {
			if s.agent.Granted(srv) {
				return true
			}
		}
		return false
	}
}
