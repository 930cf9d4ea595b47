package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// maxPages bounds how many pages one list is read for (docs/operations.md#startup); an upstream
// that keeps returning cursors is cut off there, with a warning.
const maxPages = 50

// kind is one discoverable list; kinds combine as a bit set.
type kind uint8

const (
	kindTools kind = 1 << iota
	kindResources
	kindTemplates
	kindPrompts

	allKinds = kindTools | kindResources | kindTemplates | kindPrompts
)

// listSpec says how to list one kind.
type listSpec struct {
	kind   kind
	method string
	key    string // the array's key in the result
}

var listSpecs = []listSpec{
	{kindTools, "tools/list", "tools"},
	{kindResources, "resources/list", "resources"},
	{kindTemplates, "resources/templates/list", "resourceTemplates"},
	{kindPrompts, "prompts/list", "prompts"},
}

// catalog is the result of one discovery; only the kinds in set are
// meaningful, the others are left as they were in the snapshot.
type catalog struct {
	set                           kind
	tools                         []Tool
	resources, templates, prompts []json.RawMessage
	// hints are the lists' cache hints, by kind (hintIndex).
	hints [4]CacheHint
}

// hintIndex is the place of kind k's hint in catalog.hints.
func hintIndex(k kind) int {
	switch k {
	case kindResources:
		return 1
	case kindTemplates:
		return 2
	case kindPrompts:
		return 3
	}
	return 0
}

// apply writes the discovered kinds into snap.
func (cat *catalog) apply(snap *Snapshot) {
	if cat.set&kindTools != 0 {
		snap.Tools = cat.tools
		snap.ToolsHint = cat.hints[hintIndex(kindTools)]
	}
	if cat.set&kindResources != 0 {
		snap.Resources = cat.resources
		snap.ResourcesHint = cat.hints[hintIndex(kindResources)]
	}
	if cat.set&kindTemplates != 0 {
		snap.ResourceTemplates = cat.templates
		snap.TemplatesHint = cat.hints[hintIndex(kindTemplates)]
	}
	if cat.set&kindPrompts != 0 {
		snap.Prompts = cat.prompts
		snap.PromptsHint = cat.hints[hintIndex(kindPrompts)]
	}
}

// advertised reports whether the upstream's capabilities cover k.
func (s *session) advertised(k kind) bool {
	switch k {
	case kindTools:
		return s.caps.Tools
	case kindResources, kindTemplates:
		return s.caps.Resources
	case kindPrompts:
		return s.caps.Prompts
	}
	return false
}

// discover lists the kinds in want. tools/list is always tried: if the
// upstream advertises tools, its failure fails the discovery; if not, an
// error just means no tools. Resources, templates and prompts are listed
// only when advertised, and their failure is logged and leaves that kind
// empty, so one broken optional list does not take the tools down.
func (s *session) discover(ctx context.Context, want kind) (*catalog, error) {
	cat := &catalog{}
	for _, spec := range listSpecs {
		if want&spec.kind == 0 {
			continue
		}
		if spec.kind != kindTools && !s.advertised(spec.kind) {
			cat.set |= spec.kind // leave it nil
			continue
		}
		items, hint, err := s.listAll(ctx, spec)
		if err != nil {
			if ctx.Err() != nil || s.ctx.Err() != nil || errors.Is(err, ErrSessionExpired) {
				return nil, err
			}
			var rpc *RPCError
			switch {
			case spec.kind == kindTools && s.caps.Tools:
				return nil, err
			case spec.kind == kindTools && errors.As(err, &rpc):
				s.log.Debug().Err(err).Msg("no tools: tools capability not advertised")
			default:
				s.log.Warn().Err(err).Msg("discovery failed; that list stays empty")
			}
			items, hint = nil, CacheHint{}
		}
		cat.set |= spec.kind
		cat.hints[hintIndex(spec.kind)] = hint
		switch spec.kind {
		case kindTools:
			cat.tools = s.parseTools(items)
		case kindResources:
			cat.resources = items
		case kindTemplates:
			cat.templates = items
		case kindPrompts:
			cat.prompts = items
		}
	}
	return cat, nil
}

// listPage is one page of any list result, items kept as raw bytes.
type listPage struct {
	items      []json.RawMessage
	nextCursor *string
	hint       CacheHint
}

// listAll reads every page of one list (at most maxPages), following
// nextCursor. A cursor the upstream already gave is an error. The list's
// cache hint is the most restrictive of its pages' (the smallest TTL,
// private when any page is), given only when every page gave one.
func (s *session) listAll(ctx context.Context, spec listSpec) ([]json.RawMessage, CacheHint, error) {
	var all []json.RawMessage
	seen := map[string]bool{}
	var cursor *string
	var hint CacheHint
	for page := 1; ; page++ {
		var params json.RawMessage
		if cursor != nil {
			params, _ = json.Marshal(struct {
				Cursor string `json:"cursor"`
			}{*cursor})
		}
		raw, err := s.request(ctx, spec.method, params)
		if err != nil {
			return nil, CacheHint{}, err
		}
		p, err := decodePage(raw, spec.key)
		if err != nil {
			return nil, CacheHint{}, s.c.opError(spec.method, err)
		}
		all = append(all, p.items...)
		if page == 1 {
			hint = p.hint
		} else {
			hint = hint.Narrow(p.hint)
		}
		if p.nextCursor == nil || *p.nextCursor == "" {
			return all, hint, nil
		}
		if seen[*p.nextCursor] {
			return nil, CacheHint{}, s.c.opError(spec.method, fmt.Errorf("%w on page %d", ErrRepeatedCursor, page))
		}
		seen[*p.nextCursor] = true
		if page == maxPages {
			s.log.Warn().Str("method", spec.method).Int("pages", maxPages).
				Msg("list has more pages than the limit; the rest is ignored")
			return all, hint, nil
		}
		cursor = p.nextCursor
	}
}

// decodePage reads the items under key and nextCursor from a list result
// in one pass. Each item is a slice of raw, its bytes exactly as sent. A
// result naming either member twice is refused: which one counts would be
// a guess (the rule rawjson's envelope parser follows).
func decodePage(raw json.RawMessage, key string) (listPage, error) {
	v, err := rawjson.Pick(raw, key, "nextCursor", "ttlMs", "cacheScope")
	if errors.Is(err, rawjson.ErrDuplicateMember) {
		return listPage{}, fmt.Errorf("%w: the result's %v", ErrBadResponse, err)
	}
	if err != nil {
		return listPage{}, fmt.Errorf("%w: result is not an object", ErrBadResponse)
	}
	var p listPage
	items, cursor := v[0], v[1]
	if !rawjson.IsNull(items) {
		spans, err := rawjson.Elements(items)
		if err != nil {
			return listPage{}, fmt.Errorf("%w: %q is not an array", ErrBadResponse, key)
		}
		p.items = make([]json.RawMessage, len(spans))
		for i, sp := range spans {
			p.items[i] = items[sp.Start:sp.End:sp.End] // full: an append copies
		}
	}
	if !rawjson.IsNull(cursor) {
		c, err := rawjson.Unquote(cursor)
		if err != nil {
			return listPage{}, fmt.Errorf("%w: nextCursor is not a string", ErrBadResponse)
		}
		p.nextCursor = &c
	}
	p.hint = ParseCacheHint(v[2], v[3], time.Now())
	return p, nil
}

// ParseCacheHint reads a result's ttlMs and cacheScope members (MCP
// 2026-07-28, server/utilities/caching; nil when absent), as of now. A
// result without a ttlMs that is a whole number gives no hint; a negative
// one counts as 0, as the revision asks; only cacheScope "public" is
// public.
func ParseCacheHint(ttl, scope json.RawMessage, now time.Time) CacheHint {
	if len(ttl) == 0 || rawjson.IsNull(ttl) {
		return CacheHint{}
	}
	ms, err := strconv.ParseInt(string(ttl), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(ttl), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > maxHintMs {
			return CacheHint{}
		}
		ms = int64(f)
	}
	ms = min(max(ms, 0), maxHintMs)
	return CacheHint{Given: true, TTL: time.Duration(ms) * time.Millisecond, Public: string(scope) == `"public"`, Fetched: now}
}

// maxHintMs caps a TTL at a day: a server's longer hint is held to it,
// and a duration stays far from overflowing.
const maxHintMs = 24 * 60 * 60 * 1000

// parseTools reads name, description and readOnlyHint from each raw tool
// without touching its bytes. A tool without a non-empty string name, or
// with a name seen before, is skipped with a warning.
func (s *session) parseTools(items []json.RawMessage) []Tool {
	tools := make([]Tool, 0, len(items))
	seen := make(map[string]bool, len(items))
	invalid := map[string]bool{}
	defer func() { s.c.invalidTools.Store(&invalid) }()
	for i, raw := range items {
		t, err := parseTool(raw)
		if err == nil {
			if t.headers, err = paramHeaderTool(t.Name, raw); err != nil {
				invalid[t.Name] = true
				s.log.Warn().Str("tool", t.Name).Err(err).Msg("tool skipped: it could not be called as MCP 2026-07-28 requires (SEP-2243)")
				continue
			}
		}
		if err != nil {
			s.log.Warn().Int("index", i).Err(err).Msg("tool skipped")
			continue
		}
		if seen[t.Name] {
			s.log.Warn().Str("tool", t.Name).Msg("duplicate tool name; later entry skipped")
			continue
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	return tools
}

// parseTool reads the fields the proxy needs from one raw tool object, in
// one pass. A tool naming name, description or annotations twice is
// refused, as decodePage refuses its members.
func parseTool(raw json.RawMessage) (Tool, error) {
	v, err := rawjson.Pick(raw, "name", "description", "annotations")
	if errors.Is(err, rawjson.ErrDuplicateMember) {
		return Tool{}, fmt.Errorf("%w: the tool's %v", ErrBadResponse, err)
	}
	if err != nil {
		return Tool{}, fmt.Errorf("%w: tool is not an object", ErrBadResponse)
	}
	name, description, annotations := v[0], v[1], v[2]
	t := Tool{Raw: raw}
	if t.Name, err = rawjson.Unquote(name); err != nil || t.Name == "" {
		return Tool{}, fmt.Errorf("%w: tool has no string name", ErrBadResponse)
	}
	t.Description, _ = rawjson.Unquote(description) // not a string: ""
	t.ReadOnly = rawjson.Flag(annotations, "readOnlyHint")
	return t, nil
}

// listChangedKinds maps an upstream list_changed notification to the kinds
// to re-discover (0 for any other method).
func listChangedKinds(method string) kind {
	switch mcp.MCPMethod(method) {
	case mcp.MethodNotificationToolsListChanged:
		return kindTools
	case mcp.MethodNotificationResourcesListChanged:
		return kindResources | kindTemplates
	case mcp.MethodNotificationPromptsListChanged:
		return kindPrompts
	}
	return 0
}

// RefreshStale has the lists whose cache hint has passed (CacheHint.Stale)
// read again, in the background, and a snapshot published when they
// change: a list is read again when a client needs it, not on a timer (MCP
// 2026-07-28, server/utilities/caching: a TTL is not a polling interval).
// It returns at once; the caller serves what it has.
func (c *Conn) RefreshStale() {
	snap := c.Snapshot()
	if snap.State != StateConnected {
		return
	}
	now := time.Now()
	var k kind
	for _, h := range []struct {
		k    kind
		hint CacheHint
	}{{kindTools, snap.ToolsHint}, {kindResources, snap.ResourcesHint}, {kindTemplates, snap.TemplatesHint}, {kindPrompts, snap.PromptsHint}} {
		if h.hint.Stale(now) {
			k |= h.k
		}
	}
	if k == 0 {
		return
	}
	s := c.acquire()
	if s == nil {
		return
	}
	defer s.end()
	s.refresh.request(k, false)
}
