package downstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// The wire layer. Every client message passes inbound before mcp-go sees it,
// and every message mcp-go writes passes outbound before the client sees it.
//
// inbound notes the ids of tools/list and tools/call requests. A tools/call
// also gets a slot, whose token is added to the request's params._meta under
// slotMetaKey so that the tool handler, which mcp-go gives no request id, can
// find it. The handler leaves the upstream's raw result (or the exact error)
// in the slot and returns a placeholder to mcp-go; outbound then writes the
// response to that id itself: {"jsonrpc":"2.0","id":<id>,"result":<raw>}.
// For tools/list, outbound replaces mcp-go's shadow tools with the catalog's
// bytes. Everything else passes through both untouched.

// slotMetaKey is the _meta key carrying a slot token from inbound to the
// tool handler. It never reaches an upstream: the handler forwards the
// client's original _meta, kept in the slot.
const slotMetaKey = "io.github.mcp-proxy/slot"

// slot carries one tools/call's outcome from the handler to outbound.
type slot struct {
	state  *sessionState   // the session the call belongs to
	name   string          // the tool name the client asked for
	meta   json.RawMessage // the client's params._meta, as it came
	modern bool            // the request used the stateless 2026-07-28 protocol
	direct func([]byte)    // see pending.direct

	mu     sync.Mutex
	done   bool
	result json.RawMessage
	err    *wireError
}

func (s *slot) set(result json.RawMessage, err *wireError) {
	s.mu.Lock()
	s.done, s.result, s.err = true, result, err
	s.mu.Unlock()
}

func (s *slot) get() (done bool, result json.RawMessage, err *wireError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done, s.result, s.err
}

// slotTable maps slot tokens to slots for the tool handler. Tokens are
// random: a request that reached mcp-go without passing the wire layer
// cannot name another call's slot.
type slotTable struct {
	mu sync.Mutex
	m  map[string]*slot
}

func (t *slotTable) add(s *slot) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	tok := hex.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[tok] = s
	return tok
}

func (t *slotTable) remove(tok string) {
	t.mu.Lock()
	delete(t.m, tok)
	t.mu.Unlock()
}

// fromMeta finds the slot named in a request's _meta.
func (t *slotTable) fromMeta(meta *mcp.Meta) *slot {
	if meta == nil {
		return nil
	}
	tok, _ := meta.AdditionalFields[slotMetaKey].(string)
	if tok == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[tok]
}

// pendingKind says how outbound treats the response to a noted request.
type pendingKind int

const (
	pendingList pendingKind = iota + 1
	pendingCall
	pendingEcho     // only the client's id is put back
	pendingDiscover // server/discover: the session's instructions go in
)

type pendingEntry struct {
	kind  pendingKind
	instr string // pendingDiscover: set by prepare
	// id is the client's own id bytes, echoed in the responses the wire
	// layer writes (mcp-go turns integer ids above 2^53 into float64).
	id    json.RawMessage
	state *sessionState
	slot  *slot
	token string
}

// pending holds the requests of one downstream connection (stdio) or one
// HTTP POST whose responses outbound rewrites, by raw JSON-RPC id.
type pending struct {
	p *Proxy
	// direct writes a message to the client in order with the responses
	// the wire layer writes (stdio); nil when the transport has no such path.
	direct func(msg []byte)
	// answering counts the answers the wire layer is writing itself (stdio).
	// A counter, not a WaitGroup: a signal's drain waits while the read
	// loop may still start answers.
	answering atomic.Int64
	// fastCalls is set on stdio, where the wire layer answers tools/call
	// itself (direct_tools.go); calls tracks those calls.
	fastCalls bool
	calls     directCalls
	callCtx   context.Context // the context fast-path calls run under (stdio)
	mu        sync.Mutex
	m         map[string]*pendingEntry
}

func newPending(p *Proxy) *pending { return &pending{p: p, m: map[string]*pendingEntry{}} }

func (pd *pending) put(id string, e *pendingEntry) {
	pd.mu.Lock()
	if old := pd.m[id]; old != nil && old.token != "" {
		pd.p.slots.remove(old.token)
	}
	pd.m[id] = e
	pd.mu.Unlock()
}

func (pd *pending) take(id string) *pendingEntry {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	e := pd.m[id]
	delete(pd.m, id)
	return e
}

func (pd *pending) empty() bool {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	return len(pd.m) == 0
}

// release drops every entry and its slot (the connection or POST ended).
func (pd *pending) release() {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	for id, e := range pd.m {
		if e.token != "" {
			pd.p.slots.remove(e.token)
		}
		delete(pd.m, id)
	}
}

// envelope is the part of a client message the wire layer reads.
type envelope struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	// repeats is true when the envelope names a member twice.
	repeats bool
}

// repeatsName reports whether a member list names one member twice.
func repeatsName(ms []rawjson.Member) bool {
	if len(ms) <= 16 {
		// Envelopes are small: compare pairwise, without a map.
		for i := range ms {
			for j := i + 1; j < len(ms); j++ {
				if ms[i].Key == ms[j].Key {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]bool, len(ms))
	for _, m := range ms {
		if seen[m.Key] {
			return true
		}
		seen[m.Key] = true
	}
	return false
}

// paramsRepeatName reports whether params or params._meta repeat a member
// name (the envelope's own members are checked by readEnvelope).
func paramsRepeatName(params []byte) bool {
	if len(params) == 0 || params[0] != '{' {
		return false
	}
	ms, err := rawjson.Members(params)
	if err != nil {
		return false
	}
	if repeatsName(ms) {
		return true
	}
	for _, m := range ms {
		if meta := params[m.ValueStart:m.ValueEnd]; m.Key == "_meta" && len(meta) > 0 && meta[0] == '{' {
			metaMembers, err := rawjson.Members(meta)
			return err == nil && repeatsName(metaMembers)
		}
	}
	return false
}

// readEnvelope reads a client message's id, method and params in one pass
// (sub-slices of msg, no copies). ok is false for anything but a JSON object.
func readEnvelope(msg []byte) (env envelope, ok bool) {
	ms, err := rawjson.Members(msg)
	if err != nil {
		return env, false
	}
	env.repeats = repeatsName(ms)
	for _, m := range ms {
		v := msg[m.ValueStart:m.ValueEnd]
		switch m.Key {
		case "id":
			env.ID = v
		case "method":
			if json.Unmarshal(v, &env.Method) != nil {
				return env, false
			}
		case "params":
			env.Params = v
		}
	}
	return env, true
}

// inbound notes msg in pd when its response is to be rewritten, and returns
// the message to hand to mcp-go. msg is never modified. wait is true for a
// tools/call naming a tool that no upstream has offered yet while upstreams
// are still starting: the caller hands it on after waitStartup, so that a
// host calling a tool it remembers is not told "unknown tool" just because
// the proxy has only just started.
func (pd *pending) inbound(msg []byte, st *sessionState) (out []byte, wait bool) {
	env, ok := readEnvelope(msg)
	if !ok || len(env.ID) == 0 || string(env.ID) == "null" {
		return msg, false // not a request (or not ours to judge): mcp-go answers it
	}
	clientID := env.ID
	if !safeID(env.ID) {
		// mcp-go would not echo this id exactly (a big integer becomes a
		// float64, escapes are re-encoded): it sees a surrogate, and the
		// response gets the client's bytes back.
		sur := rawjson.String("mcp-proxy-id-" + strconv.FormatUint(pd.p.ids.Add(1), 10))
		if out, err := rawjson.Set(msg, "id", sur); err == nil {
			msg, env.ID = out, sur
		}
	}
	switch env.Method {
	case string(mcp.MethodToolsList):
		pd.put(idKey(env.ID), &pendingEntry{kind: pendingList, id: clientID, state: st})
		return msg, false
	case string(mcp.MethodToolsCall):
		return pd.inboundCall(msg, env, clientID, st)
	case "server/discover":
		if pd.p.needsInstructions(st) {
			pd.put(idKey(env.ID), &pendingEntry{kind: pendingDiscover, id: clientID, state: st})
			return msg, true // prepare runs after the startup wait
		}
	}
	if !bytes.Equal(env.ID, clientID) {
		pd.put(idKey(env.ID), &pendingEntry{kind: pendingEcho, id: clientID})
	}
	return msg, false
}

// maxSafeID is the largest integer id a float64 holds exactly (2^53).
const maxSafeID = 1 << 53

// safeID reports whether mcp-go echoes id exactly as the client wrote it:
// a string of plain printable ASCII (no escapes, nothing encoding/json
// would escape), or an integer written canonically with |n| <= 2^53.
func safeID(id json.RawMessage) bool {
	if len(id) >= 2 && id[0] == '"' {
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c >= 0x7f || c == '\\' || c == '"' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	s := string(id)
	if strings.HasPrefix(s, "-") {
		s = s[1:]
	}
	if s == "" || len(s) > 16 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n <= maxSafeID
}

func (pd *pending) inboundCall(msg []byte, env envelope, clientID json.RawMessage, st *sessionState) ([]byte, bool) {
	var params struct {
		Name string
		Meta json.RawMessage
	}
	ms, err := rawjson.Members(env.Params)
	if err != nil {
		return msg, false
	}
	for _, m := range ms {
		switch m.Key {
		case "name":
			if json.Unmarshal(env.Params[m.ValueStart:m.ValueEnd], &params.Name) != nil {
				return msg, false
			}
		case "_meta":
			params.Meta = env.Params[m.ValueStart:m.ValueEnd]
		}
	}
	meta := params.Meta
	if len(meta) == 0 || string(meta) == "null" {
		meta = nil
	}
	s := &slot{state: st, name: params.Name, meta: meta, modern: isModernMeta(meta), direct: pd.direct}
	tok := pd.p.slots.add(s)
	base := meta
	if base == nil {
		base = []byte(`{}`)
	}
	newMeta, err := rawjson.Set(base, slotMetaKey, rawjson.String(tok))
	if err == nil {
		var newParams []byte
		if newParams, err = rawjson.Set(env.Params, "_meta", newMeta); err == nil {
			msg, err = rawjson.Set(msg, "params", newParams)
		}
	}
	if err != nil {
		pd.p.slots.remove(tok)
		return msg, false
	}
	pd.put(idKey(env.ID), &pendingEntry{kind: pendingCall, id: clientID, state: st, slot: s, token: tok})
	if _, known := pd.p.Catalog().Lookup(params.Name); !known {
		if pd.p.startupPending() {
			return msg, true // the caller waits for the upstreams (waitStartup)
		}
		pd.p.Refresh() // see awaitTool
	}
	return msg, false
}

func isModernMeta(meta json.RawMessage) bool {
	if meta == nil {
		return false
	}
	v, ok, err := rawjson.Get(meta, mcp.MetaKeyProtocolVersion)
	if err != nil || !ok {
		return false
	}
	var s string
	return json.Unmarshal(v, &s) == nil && mcp.IsModernProtocol(s)
}

// idKey normalizes a raw JSON-RPC id so that the request's spelling and the
// response's (re-encoded by mcp-go) compare equal.
func idKey(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	switch x := v.(type) {
	case string:
		return "s:" + x
	case float64:
		return "n:" + strconv.FormatFloat(x, 'g', -1, 64)
	}
	return string(raw)
}

// outbound returns the message to send to the client in place of msg.
func (pd *pending) outbound(msg []byte) []byte {
	if pd.empty() {
		return msg
	}
	id, ok := responseID(msg)
	if !ok {
		return msg
	}
	e := pd.take(idKey(id))
	if e == nil {
		return msg
	}
	var out []byte
	switch e.kind {
	case pendingList:
		out = pd.p.listResponse(msg, e.id, e.state)
	case pendingCall:
		pd.p.slots.remove(e.token)
		out = pd.p.callResponse(msg, e.id, e.slot)
	case pendingDiscover:
		out = msg
		if result, ok, err := rawjson.Get(msg, "result"); err == nil && ok && e.instr != "" {
			if r, err := rawjson.Set(result, "instructions", rawjson.String(e.instr)); err == nil {
				out = response(e.id, "result", r)
			}
		}
	default:
		out = msg
	}
	// A response passed as mcp-go wrote it carries the surrogate id.
	if sameBytes(out, msg) && !bytes.Equal(id, e.id) {
		if fixed, err := rawjson.Set(msg, "id", e.id); err == nil {
			return fixed
		}
	}
	return out
}

// listResponse puts the catalog's tools into mcp-go's tools/list response,
// keeping every other member of its result (resultType, _meta).
func (p *Proxy) listResponse(msg []byte, id json.RawMessage, st *sessionState) []byte {
	result, ok, err := rawjson.Get(msg, "result")
	if err != nil || !ok {
		return msg // an error response passes as it is
	}
	newResult, err := rawjson.Set(result, "tools", p.listFor(st))
	if err != nil {
		return msg
	}
	return response(id, "result", newResult)
}

// callResponse writes a tools/call response from its slot.
func (p *Proxy) callResponse(msg []byte, id json.RawMessage, s *slot) []byte {
	done, result, werr := s.get()
	switch {
	case done && werr != nil:
		b, _ := json.Marshal(werr)
		return response(id, "error", b)
	case done:
		if s.modern {
			if _, has, _ := rawjson.Get(result, "resultType"); !has {
				if r, err := rawjson.Set(result, "resultType", []byte(`"complete"`)); err == nil {
					result = r
				}
			}
		}
		return response(id, "result", result)
	}
	// The handler never ran: mcp-go answered on its own. When the tool does
	// not exist for this session, its "not found" becomes the proxy's
	// unknown-tool error; any other answer (a malformed modern request, say)
	// passes as mcp-go wrote it.
	if e, ok, _ := rawjson.Get(msg, "error"); ok && !p.exists(s) {
		var d struct {
			Code int `json:"code"`
		}
		if json.Unmarshal(e, &d) == nil && d.Code == mcp.INVALID_PARAMS {
			b, _ := json.Marshal(unknownTool(s.name))
			return response(id, "error", b)
		}
	}
	return msg
}

// exists reports whether the slot's tool exists for its session: in the
// catalog and not hidden by rules 1–2.
func (p *Proxy) exists(s *slot) bool {
	e, ok := p.Catalog().Lookup(s.name)
	return ok && (s.state == nil || !s.state.agent.Decide(e.policyTool(), s.state.perCall).Hidden())
}

// response builds a JSON-RPC response line body (no newline).
func response(id json.RawMessage, member string, value []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(value) + len(id) + 40)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	buf.WriteString(`,"`)
	buf.WriteString(member)
	buf.WriteString(`":`)
	buf.Write(value)
	buf.WriteByte('}')
	return buf.Bytes()
}

// responseID returns the id of msg when msg is a response. It reads only as
// far as it must: mcp-go writes "jsonrpc", "id", then "result" or "error",
// so a large result is never scanned.
func responseID(msg []byte) (json.RawMessage, bool) {
	vals, stopped, err := rawjson.Prefix(msg, "result", "error", "method")
	if err != nil || stopped == "method" {
		return nil, false
	}
	if stopped == "" {
		return nil, false // no result or error member: not a response
	}
	if id, ok := vals["id"]; ok {
		return id, true
	}
	// "id" after "result": read the whole envelope (never from mcp-go).
	all, _, err := rawjson.Prefix(msg)
	if err != nil || all["id"] == nil || all["method"] != nil {
		return nil, false
	}
	return all["id"], true
}

// prepare computes what noted requests need once upstreams are up: the
// instructions of server/discover answers. Callers run it after waitStartup.
func (pd *pending) prepare(ctx context.Context) {
	pd.mu.Lock()
	var todo []*pendingEntry
	for _, e := range pd.m {
		if e.kind == pendingDiscover && e.instr == "" {
			todo = append(todo, e)
		}
	}
	pd.mu.Unlock()
	for _, e := range todo {
		instr := pd.p.sessionInstructions(ctx, e.state)
		pd.mu.Lock()
		e.instr = instr
		pd.mu.Unlock()
	}
}

// callsInFlight reports whether a noted tools/call still awaits its response.
func (pd *pending) callsInFlight() bool {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	for _, e := range pd.m {
		if e.kind == pendingCall {
			return true
		}
	}
	return false
}

// directAnswer returns the function that answers msg in place of mcp-go
// when msg is a request of the resources/prompts surface (surface_calls.go),
// else nil. The function blocks on the upstream; callers run it off their
// read loop.
//
// call is true for a tools/call (the fast path of direct_tools.go, taken on
// stdio only): it may wait on the client's answers to server requests.
// A client's notifications/cancelled for a fast-path call cancels it here;
// the notification still goes on to mcp-go, which ignores the id.
func (pd *pending) directAnswer(msg []byte, st *sessionState) (answer func(ctx context.Context) []byte, call bool) {
	env, ok := readEnvelope(msg)
	if ok && len(env.ID) == 0 && pd.fastCalls {
		pd.calls.cancelled(env)
	}
	if !ok || len(env.ID) == 0 || string(env.ID) == "null" {
		return nil, false
	}
	if env.repeats || paramsRepeatName(env.Params) {
		// encoding/json (mcp-go) keeps the last of two equal keys and the
		// wire layer reads the first: such a request could carry a _meta
		// the wire layer never saw. Refuse it.
		return func(context.Context) []byte {
			return response(env.ID, "error", []byte(`{"code":-32600,"message":"invalid request: a member name appears twice"}`))
		}, false
	}
	switch env.Method {
	case string(mcp.MethodToolsList):
		if pd.fastLists(st, env.Params) {
			return pd.directList(env, st), false
		}
		return nil, false
	case string(mcp.MethodToolsCall):
		if !pd.fastCalls {
			return nil, false
		}
		sess := initializedSession(st)
		if sess == nil {
			return nil, false
		}
		req, werr := readCallParams(env.Params)
		if werr == nil && isModernMeta(req.meta) {
			return nil, false // the stateless protocol's calls stay with mcp-go
		}
		return pd.directCall(env, st, sess, req, werr), true
	}
	h := directMethods[env.Method]
	if h == nil {
		return nil, false
	}
	var meta json.RawMessage
	if len(env.Params) > 0 {
		meta, _, _ = rawjson.Get(env.Params, "_meta")
	}
	modern := isModernMeta(meta)
	p := pd.p
	return func(ctx context.Context) []byte {
		if strings.HasSuffix(env.Method, "/list") {
			p.waitStartup(ctx) // like tools/list (SPEC §3)
		}
		var res json.RawMessage
		var werr *wireError
		if modern && st.session() == nil && roundTripMethods[env.Method] {
			res, werr = p.surfaceRoundTrip(ctx, st, env.Method, env.Params, meta, h)
		} else {
			res, werr = h(p, ctx, st, env.Params)
		}
		if werr != nil && werr.input != nil {
			// The call asks its stateless client for input (mrtr.go).
			if b, err := inputResult(werr.input); err == nil {
				p.opts.Metrics.Request(st.agent.Name, env.Method, "ok")
				return response(env.ID, "result", b)
			}
			werr = &wireError{Code: codeInternal, Message: "cannot encode the input request"}
		}
		if werr != nil {
			p.opts.Metrics.Request(st.agent.Name, env.Method, "error")
			b, _ := json.Marshal(werr)
			return response(env.ID, "error", b)
		}
		p.opts.Metrics.Request(st.agent.Name, env.Method, "ok")
		if modern {
			if r, err := rawjson.Set(res, "resultType", []byte(`"complete"`)); err == nil {
				res = r
			}
		}
		return response(env.ID, "result", res)
	}, false
}
