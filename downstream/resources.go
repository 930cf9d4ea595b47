package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// resourcesPrompts serves the resources and prompts of the upstreams
// (docs/resources.md#resources-and-prompts): their merged lists, reads,
// prompt gets and completions routed to the server behind a name, and the
// resource subscriptions of the clients. A stateless HTTP client's read or
// get runs as a parked call (roundtrip.go).
type resourcesPrompts struct {
	*env
	catalog catalogWait
	relay   callRelay
	// sessions take a stateless client's listen as a listener.
	sessions *sessionTable
	// stop is closed when the HTTP side shuts down: listens end.
	stop <-chan struct{}
	subs subscriptions // resource subscriptions, by server and URI
}

// catalogWait is what a part needs of the catalog: the current one, the
// wait for the start (docs/operations.md#startup), and the wait for a
// catalog that knows a name still missing.
type catalogWait interface {
	Catalog() *Catalog
	waitStartup(ctx context.Context)
	catchUp(ctx context.Context, known func(*Catalog) bool)
}

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

func (rp *resourcesPrompts) listResources(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	rp.catalog.waitStartup(ctx) // like tools/list (docs/operations.md#startup)
	rp.refreshStale(r.sess)
	return listPage("resources", rp.catalog.Catalog().surface.resources, r.sess, r.params)
}

func (rp *resourcesPrompts) listTemplates(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	rp.catalog.waitStartup(ctx) // like tools/list (docs/operations.md#startup)
	rp.refreshStale(r.sess)
	return listPage("resourceTemplates", rp.catalog.Catalog().surface.templates, r.sess, r.params)
}

func (rp *resourcesPrompts) listPrompts(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	rp.catalog.waitStartup(ctx) // like tools/list (docs/operations.md#startup)
	rp.refreshStale(r.sess)
	return listPage("prompts", rp.catalog.Catalog().surface.prompts, r.sess, r.params)
}

// resourceRoute finds the server of a proxied resource URI (either form,
// docs/agents.md#names) that the session may read.
func (rp *resourcesPrompts) resourceRoute(ctx context.Context, st *session, uri string) (srv, orig string, form uriForm, up Upstream, werr *wireError) {
	g := rp.gen()
	srv, orig, bare, ok := rp.routeURI(ctx, uri)
	cfg := g.cfg.Servers[srv]
	if !ok || cfg == nil || !st.agent.Granted(srv) || !cfg.ResourcesEnabled() {
		return "", "", 0, nil, &wireError{Code: codeResourceNotFound, Message: "Resource not found: " + sanitize.Error(uri)}
	}
	if werr := rp.serverUp(srv); werr != nil {
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

// readResource answers resources/read; the method table runs it behind
// surfaced.
func (rp *resourcesPrompts) readResource(ctx context.Context, r *request) (_ json.RawMessage, werr *wireError) {
	st, params := r.sess, r.params
	uri, werr := uriParam(params)
	if werr != nil {
		return nil, werr
	}
	srv := ""
	defer rp.auditSurface(ctx, r, uri, &srv, time.Now(), &werr)
	srv, orig, form, up, werr := rp.resourceRoute(ctx, st, uri)
	if werr != nil {
		return nil, werr
	}
	out, err := rawjson.Set(params, "uri", rawjson.String(orig))
	if err != nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "invalid params"}
	}
	// In flight to srv, so that a server request it raises over stdio
	// finds this client (relay.go).
	defer rp.relay.begin(ctx, srv, r)()
	res, werr := rp.forwardRounds(ctx, r, srv, up, "resources/read", out)
	if werr != nil || isInputRequired(res) {
		return res, werr
	}
	if form == formBare {
		return compactLines(res), nil
	}
	return wrapContentsURIs(compactLines(res), srv, form == formSeed), nil
}

// subscriptions routes notifications/resources/updated to the sessions
// that subscribed, each with the URI form it used.
type subscriptions struct {
	mu sync.Mutex
	m  map[string]map[*session]string // server NUL uri -> session -> client's uri
}

func subKey(srv, orig string) string { return srv + "\x00" + orig }

func (rp *resourcesPrompts) subscribe(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	return rp.subscription(ctx, r, r.params, true)
}

func (rp *resourcesPrompts) unsubscribe(ctx context.Context, r *request) (json.RawMessage, *wireError) {
	return rp.subscription(ctx, r, r.params, false)
}

func (rp *resourcesPrompts) subscription(ctx context.Context, r *request, params json.RawMessage, on bool) (json.RawMessage, *wireError) {
	st := r.sess
	uri, werr := uriParam(params)
	if werr != nil {
		return nil, werr
	}
	srv, orig, _, up, werr := rp.resourceRoute(ctx, st, uri)
	if werr != nil {
		return nil, werr
	}
	awaitFirstConnection(ctx, up)
	if !up.Snapshot().Capabilities.ResourcesSubscribe {
		return nil, &wireError{Code: codeMethodNotFound, Message: "MCP server '" + srv + "' does not support resource subscriptions"}
	}
	out, _ := rawjson.Set(params, "uri", rawjson.String(orig))
	k := subKey(srv, orig)
	subs := &rp.subs
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
			if _, werr := rp.forward(ctx, r, srv, up, "resources/unsubscribe", out); werr != nil {
				return nil, werr
			}
		}
		return json.RawMessage(`{}`), nil
	}
	if _, werr := rp.forward(ctx, r, srv, up, "resources/subscribe", out); werr != nil {
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
func (rp *resourcesPrompts) dropSubscriptions(st *session) {
	rp.subs.mu.Lock()
	var gone []string
	for k, subs := range rp.subs.m {
		if _, ok := subs[st]; !ok {
			continue
		}
		delete(subs, st)
		if len(subs) == 0 {
			delete(rp.subs.m, k)
			gone = append(gone, k)
		}
	}
	rp.subs.mu.Unlock()
	for _, k := range gone {
		srv, orig, _ := strings.Cut(k, "\x00")
		if up := rp.gen().ups[srv]; up != nil {
			params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(orig))
			go func() { _, _ = rp.forward(context.Background(), nil, srv, up, "resources/unsubscribe", params) }()
		}
	}
}

// resourceUpdated forwards an upstream's notifications/resources/updated to
// the sessions subscribed to that resource.
func (rp *resourcesPrompts) resourceUpdated(srv string, params json.RawMessage) {
	orig, err := stringMember(params, "uri")
	if err != nil {
		return
	}
	rp.subs.mu.Lock()
	targets := map[*session]string{}
	for st, uri := range rp.subs.m[subKey(srv, orig)] {
		targets[st] = uri
	}
	rp.subs.mu.Unlock()
	for st, uri := range targets {
		st.sendUnowned(notification("notifications/resources/updated", []byte(`{"uri":`+string(rawjson.String(uri))+`}`)))
	}
}

// getPrompt answers prompts/get; the method table runs it behind
// surfaced.
func (rp *resourcesPrompts) getPrompt(ctx context.Context, r *request) (_ json.RawMessage, werr *wireError) {
	st, params := r.sess, r.params
	name, err := stringMember(params, "name")
	if err != nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "params.name is required"}
	}
	srv := ""
	defer rp.auditSurface(ctx, r, name, &srv, time.Now(), &werr)
	e := rp.promptEntry(ctx, name)
	if e == nil || !st.agent.Granted(e.Server) {
		return nil, &wireError{Code: codeInvalidParams, Message: "unknown prompt: " + sanitize.Error(name)}
	}
	srv = e.Server
	if werr := rp.serverUp(e.Server); werr != nil {
		return nil, werr
	}
	up := rp.gen().ups[e.Server]
	out, _ := rawjson.Set(params, "name", rawjson.String(e.Orig))
	defer rp.relay.begin(ctx, e.Server, r)() // see readResource
	return rp.forwardRounds(ctx, r, e.Server, up, "prompts/get", out)
}

// routeURI is surface.route of the current catalog, once it has caught up
// when the catalog routes uri nowhere (catchUp): a bare URI's server may
// be unknown only because it is still making its first connection.
func (rp *resourcesPrompts) routeURI(ctx context.Context, uri string) (srv, orig string, bare, ok bool) {
	route := func(c *Catalog) bool {
		srv, orig, bare, ok = c.surface.route(uri, rp.gen().serverNames())
		return ok
	}
	rp.catalog.catchUp(ctx, route)
	if !ok {
		route(rp.catalog.Catalog())
	}
	return srv, orig, bare, ok
}

// promptEntry returns the prompt exposed as name, or nil. A name the
// catalog does not know is looked up again once the catalog has caught up
// (catchUp): it may be unknown only because its server is still making its
// first connection.
func (rp *resourcesPrompts) promptEntry(ctx context.Context, name string) *itemEntry {
	rp.catalog.catchUp(ctx, func(c *Catalog) bool { return c.surface.byPrompt[name] != nil })
	return rp.catalog.Catalog().surface.byPrompt[name]
}

// complete routes completion/complete by its reference: a prompt's exposed
// name or a resource (template) URI.
func (rp *resourcesPrompts) complete(ctx context.Context, r *request) (json.RawMessage, *wireError) {
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
		e := rp.promptEntry(ctx, name)
		if e == nil || !st.agent.Granted(e.Server) {
			return nil, &wireError{Code: codeInvalidParams, Message: "unknown prompt: " + sanitize.Error(name)}
		}
		srv, member, orig = e.Server, "name", e.Orig
	case "ref/resource":
		uri, _ := stringMember(ref, "uri")
		s, o, _, ok := rp.routeURI(ctx, uri)
		if cfg := rp.gen().cfg.Servers[s]; !ok || cfg == nil || !cfg.ResourcesEnabled() || !st.agent.Granted(s) {
			return nil, &wireError{Code: codeResourceNotFound, Message: "Resource not found: " + sanitize.Error(uri)}
		}
		srv, member, orig = s, "uri", o
	default:
		return nil, &wireError{Code: codeInvalidParams, Message: "params.ref.type must be ref/prompt or ref/resource"}
	}
	if werr := rp.serverUp(srv); werr != nil {
		return nil, werr
	}
	up := rp.gen().ups[srv]
	awaitFirstConnection(ctx, up)
	if !up.Snapshot().Capabilities.Completions {
		return json.RawMessage(`{"completion":{"values":[]}}`), nil // nothing to complete from
	}
	newRef, _ := rawjson.Set(ref, member, rawjson.String(orig))
	out, _ := rawjson.Set(params, "ref", newRef)
	return rp.forward(ctx, r, srv, up, "completion/complete", out)
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

// surfaced wraps h, the handler of resources/read or prompts/get, in
// surfaceRequest.
func (rp *resourcesPrompts) surfaced(h handler) handler {
	return func(ctx context.Context, r *request) (json.RawMessage, *wireError) {
		return rp.surfaceRequest(ctx, r, h)
	}
}

// surfaceRequest runs a resources/read or prompts/get (h). A later round
// of a 2026-07-28 client's request resumes its parked call
// (roundtrip.go), or, when its upstream speaks 2026-07-28, sends the
// client's answers upstream (passthrough.go); a stateless HTTP client's
// first round runs as a parked call, so that a session-era server's request
// reaches the client through a round trip.
func (rp *resourcesPrompts) surfaceRequest(ctx context.Context, r *request, h handler) (json.RawMessage, *wireError) {
	if r.modern {
		if state, _ := stringMember(r.params, "requestState"); isSealedState(state) {
			st, werr := rp.openState(r, surfaceKey(r), state)
			if werr != nil {
				return nil, werr
			}
			if st.Park != "" {
				res, input, werr := rp.relay.resumeParked(ctx, r, st)
				return input.resultOr(res), werr
			}
			ctx = withRound(ctx, &st)
		}
	}
	if !parkable(r) {
		return h(ctx, r)
	}
	// The handler registers the request as in flight to its server, so a
	// stdio upstream's request finds r, and through it the parked call.
	what, _ := stringMember(r.params, surfaceTarget(r.method))
	res, input, werr := rp.relay.startParked(ctx, r, surfaceKey(r), rp.serverTimeout(rp.surfaceServer(ctx, r.sess, r.method, what)), nil,
		func(cctx context.Context) (json.RawMessage, *wireError) { return h(cctx, r) })
	return input.resultOr(res), werr
}

// surfaceTarget is the params member naming what a resources/read or a
// prompts/get asks for.
func surfaceTarget(method string) string {
	if method == "prompts/get" {
		return "name"
	}
	return "uri"
}

// surfaceKey is what a resources/read or prompts/get asks for, as its
// request states name it: the method and its target.
func surfaceKey(r *request) string {
	what, _ := stringMember(r.params, surfaceTarget(r.method))
	return r.method + " " + what
}

// surfaceServer is the upstream a resources/read (by URI) or prompts/get
// (by name) goes to, or "" when it routes nowhere (the handler says why).
func (rp *resourcesPrompts) surfaceServer(ctx context.Context, s *session, method, what string) string {
	if method == "prompts/get" {
		if e := rp.promptEntry(ctx, what); e != nil {
			return e.Server
		}
		return ""
	}
	srv, _, _, _, werr := rp.resourceRoute(ctx, s, what)
	if werr != nil {
		return ""
	}
	return srv
}
