package downstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/override"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// ToolEntry is one tool as the proxy exposes it.
type ToolEntry struct {
	Exposed string // the name hosts see and call
	Base    string // Exposed before any collision hash suffix: what policy rules also match
	// Default is, for a tool a tools.overrides name renamed (docs/agents.md#overrides-and-rate-limits),
	// the name it would have without the rename; policy rules match it
	// too. "" for the others.
	Default     string
	Server      string // configured server name
	Name        string // the upstream's own name
	Description string // exposed description (override, fallback filled, TAG characters stripped)
	// ReadOnly is annotations.readOnlyHint, after the tool's override.
	ReadOnly bool
	// Raw is the upstream's tool object with only the name (and, where the
	// upstream gave none or an unsafe one, the description) replaced, and
	// what the tool's override changes (title, description, annotations,
	// pinned parameters cut from inputSchema).
	Raw json.RawMessage
	// Connected is false for the last known tools of a server that is down:
	// they keep their names and routes but are not listed.
	Connected bool
	// Filtered is true when the server's tools.include/exclude drop the
	// tool: it is never listed, and calling it is "unknown tool" (docs/agents.md#agents-bundles-and-policy
	// rule 2), counted as a server_filter denial.
	Filtered bool
	// Held is true when tool integrity quarantines the tool (docs/security.md#tool-integrity): it
	// is never listed nor found by tool_search, and a call gets refusal.
	Held    bool
	refusal string
	// override is the tool's compiled override (docs/agents.md#overrides-and-rate-limits), nil for none:
	// the call chain reads its pinned arguments.
	override *override.Tool
	// series caches the tool's call metrics (docs/operations.md#metrics) once
	// a call has resolved them; a copy of the entry shares it, and it goes
	// away with the last catalog that holds the tool.
	series *metrics.ToolSeries

	// src is the upstream's tool object Raw was made from (shared with the
	// upstream's snapshot, never a copy), and visible what clients were to
	// see of it (src itself, or src with hidden text stripped): the next
	// build reuses Raw while both are the same.
	src, visible json.RawMessage
}

// listed reports whether the entry is in tools/list before any agent rule.
func (e *ToolEntry) listed() bool { return e.Connected && !e.Filtered && !e.Held }

// Catalog is an immutable merged view of every upstream's tools. The bytes
// of the listed tools are held once, in result: a tools/list result that
// lists the proxy's own tools own, then every listed entry, each entry's
// Raw a slice of it. own is what the default agent's sessions are offered
// when the catalog is built, so that their view serves result itself
// (sessionList, views.go); a view with other own tools or fewer entries
// makes its own.
type Catalog struct {
	tools []*ToolEntry // sorted by exposed name
	// order holds the entries of tools in list order: servers in config
	// order, each server's tools in the server's own order
	// (docs/protocol.md#list-order-and-cache-hints), whatever the order in
	// which they connected.
	order    []*ToolEntry
	byName   map[string]*ToolEntry
	own      []byte // the own tools at the head of result's list, each followed by a comma
	listed   []byte // the listed (connected, unfiltered) entries' Raw, comma-separated, inside result
	result   []byte // {"tools":[own listed]}
	names    *namespace.Table
	warnings []string
	surface  *surface // resources, templates and prompts (surface.go)
}

// serverTools is one server's input to a catalog build.
type serverTools struct {
	name      string
	rank      int // the server's place in config order
	prefix    string
	include   []string
	exclude   []string
	connected bool
	tools     []upstream.Tool
	overrides map[string]*override.Tool // by upstream tool name; nil: none
}

// reviewer is tool integrity's part in a catalog build (docs/security.md#tool-integrity): the
// verdict on each tool of a connected server, in order, given what
// clients would see of each (shown: after the tool's override, docs/agents.md#overrides-and-rate-limits)
// and every server's exposed names (a description naming another server's
// tool is a finding). nil reviews nothing.
type reviewer func(server string, tools []upstream.Tool, shown []shownTool, peers *integrity.Peers) []integrity.Verdict

// buildCatalog merges servers under style. Naming covers the last known tools
// of servers that are down too, so that a server going away never renames
// another server's tools.
func buildCatalog(style namespace.Style, servers []serverTools) *Catalog {
	return rebuildCatalog(style, servers, nil, nil, nil)
}

// rebuildCatalog is buildCatalog reusing the entries of prev (nil: none)
// whose server, name, exposed name and base, upstream bytes, override and
// integrity verdict are unchanged, so that a rebuild after one upstream's
// change rewrites only that upstream's tools. Tools named in prev keep their
// names (namespace.Rebuild), except where an override's name is reserved.
// review (nil: none) judges the tools of the connected servers. own are
// the own tools that lead the result (see Catalog).
func rebuildCatalog(style namespace.Style, servers []serverTools, prev *Catalog, review reviewer, own []byte) *Catalog {
	inputs := make([]namespace.Input, 0, len(servers))
	shown := make([][]shownTool, len(servers)) // by server, as servers
	var overrideWarnings []string
	for si, s := range servers {
		in := namespace.Input{Server: s.name, Prefix: s.prefix, Names: make([]string, len(s.tools))}
		for i, t := range s.tools {
			in.Names[i] = t.Name
			if !filter.ServerTool(s.include, s.exclude, t.Name) {
				if in.Hidden == nil {
					in.Hidden = map[string]bool{}
				}
				in.Hidden[t.Name] = true // never exposed: a bare name yields to an exposed one
			}
		}
		sh, warns := showTools(s.name, s.overrides, s.tools, s.connected)
		shown[si], overrideWarnings = sh, append(overrideWarnings, warns...)
		for i, st := range sh {
			if st.ov != nil && st.ov.Name() != "" {
				if in.Renames == nil {
					in.Renames = map[string]string{}
				}
				in.Renames[s.tools[i].Name] = st.ov.Name()
			}
		}
		inputs = append(inputs, in)
	}
	var prevNames *namespace.Table
	if prev != nil {
		prevNames = prev.names
	}
	table, warnings := namespace.Rebuild(style, inputs, prevNames)
	verdicts := reviewAll(review, servers, shown, table)

	c := &Catalog{byName: make(map[string]*ToolEntry, table.Len()), names: table, warnings: append(warnings, overrideWarnings...)}
	for si, s := range servers {
		for i, t := range s.tools {
			te, ok := table.Entry(s.name, t.Name)
			if !ok {
				continue
			}
			exposed := te.Exposed
			filtered := !filter.ServerTool(s.include, s.exclude, t.Name)
			st := shown[si][i]
			visible, held, refusal := st.raw, false, ""
			if v := verdicts[s.name]; i < len(v) {
				if v[i].Visible != nil {
					visible = v[i].Visible
				}
				if held = v[i].Held; held {
					refusal = v[i].Refusal(exposed)
				}
			}
			base, deflt := te.Base, te.Default
			e := prev.reusable(s.name, exposed, base, deflt, t, st, visible, held)
			switch {
			case e == nil:
				var err error
				if e, err = exposeTool(s.name, exposed, t, visible, st.readOnly); err != nil {
					c.warnings = append(c.warnings, fmt.Sprintf("server %s: tool %s skipped: %v", s.name, sanitize.Text(t.Name), err))
					continue
				}
				e.Base, e.Default, e.Connected, e.Filtered, e.Held, e.refusal = base, deflt, s.connected, filtered, held, refusal
				e.override = st.ov
			case s.connected && !filtered || e.Connected != s.connected || e.Filtered != filtered:
				// Published entries are immutable (calls read them while
				// this runs); a listed one gets its Raw moved into the new
				// list below.
				cp := *e
				if e.listed() && (!s.connected || filtered) {
					cp.Raw = bytes.Clone(e.Raw) // must not hold on to the old list
				}
				cp.Connected, cp.Filtered = s.connected, filtered
				e = &cp
			}
			// Otherwise the published entry is taken as it is: it is
			// unlisted, with the same state.
			c.byName[exposed] = e
			c.tools = append(c.tools, e)
		}
	}
	// Each server's entries are in its own order already: a stable sort by
	// the server's rank makes the list order.
	rank := make(map[string]int, len(servers))
	for _, s := range servers {
		rank[s.name] = s.rank
	}
	c.order = slices.Clone(c.tools)
	slices.SortStableFunc(c.order, func(a, b *ToolEntry) int { return cmp.Compare(rank[a.Server], rank[b.Server]) })
	sort.Slice(c.tools, func(i, j int) bool { return c.tools[i].Exposed < c.tools[j].Exposed })
	c.joinListed(own)
	return c
}

// joinListed writes own and the listed entries' Raw into c.result and
// points each of those entries' Raw at its bytes there. The entries must
// not be published yet.
func (c *Catalog) joinListed(own []byte) {
	const head, tail = `{"tools":[`, `]}`
	n := len(head) + len(own) + len(tail)
	for _, e := range c.order {
		if e.listed() {
			n += len(e.Raw) + 1
		}
	}
	buf := make([]byte, 0, n)
	buf = append(append(buf, head...), own...)
	start := len(buf)
	for _, e := range c.order {
		if !e.listed() {
			continue
		}
		if len(buf) > start {
			buf = append(buf, ',')
		}
		at := len(buf)
		buf = append(buf, e.Raw...)
		e.Raw = buf[at:len(buf):len(buf)] // full: an append copies
	}
	c.listed = buf[start:len(buf):len(buf)]
	if len(c.listed) == 0 && len(own) > 0 {
		buf = buf[:len(buf)-1] // own's last comma
	}
	buf = append(buf, tail...)
	c.result = buf[:len(buf):len(buf)]
	c.own = own
}

// reusable returns c's entry for a tool that would be exposed the same way
// again: same route, same exposed, base and default names, same upstream
// bytes, same override, same verdict. The entry may differ from the new one
// in Connected and Filtered only. A nil c has none.
func (c *Catalog) reusable(server, exposed, base, deflt string, t upstream.Tool, st shownTool, visible json.RawMessage, held bool) *ToolEntry {
	if c == nil {
		return nil
	}
	e := c.byName[exposed]
	if e == nil || e.Server != server || e.Name != t.Name || e.Base != base || e.Default != deflt || !bytes.Equal(e.src, t.Raw) ||
		e.override != st.ov || e.ReadOnly != st.readOnly || e.Held != held || !bytes.Equal(e.visible, visible) {
		return nil
	}
	return e
}

// reviewAll runs review on the tools of every connected server, by server;
// shown is by server, as servers.
func reviewAll(review reviewer, servers []serverTools, shown [][]shownTool, table *namespace.Table) map[string][]integrity.Verdict {
	if review == nil {
		return nil
	}
	n := 0
	for _, s := range servers {
		n += len(s.tools)
	}
	peers := make([]integrity.PeerTool, 0, n)
	for _, s := range servers {
		for _, t := range s.tools {
			if exposed, ok := table.Exposed(s.name, t.Name); ok {
				peers = append(peers, integrity.PeerTool{Server: s.name, Name: t.Name, Exposed: exposed})
			}
		}
	}
	index := integrity.NewPeers(peers)
	out := make(map[string][]integrity.Verdict, len(servers))
	for si, s := range servers {
		if s.connected {
			out[s.name] = review(s.name, s.tools, shown[si], index)
		}
	}
	return out
}

// sameListing reports whether a and b list the same tools with the same
// bytes and have as many entries.
func sameListing(a, b *Catalog) bool {
	return len(a.tools) == len(b.tools) && bytes.Equal(a.listed, b.listed)
}

// exposeTool rewrites one upstream tool object for the downstream side:
// visible (the upstream's object or its override's, or what tool integrity
// left of it) under its exposed name. readOnly is visible's readOnlyHint.
func exposeTool(server, exposed string, t upstream.Tool, visible json.RawMessage, readOnly bool) (*ToolEntry, error) {
	raw, err := rawjson.Set(compactLines(visible), "name", rawjson.String(exposed))
	if err != nil {
		return nil, err
	}
	description := t.Description
	if !bytes.Equal(visible, t.Raw) {
		description, _ = stringMember(visible, "description")
	}
	desc := sanitize.StripTags(description)
	switch {
	case desc == "":
		desc = namespace.DefaultDescription(server, t.Name)
		raw, err = rawjson.Set(raw, "description", rawjson.String(desc))
	case desc != description:
		raw, err = rawjson.Set(raw, "description", rawjson.String(desc))
	}
	if err != nil {
		return nil, err
	}
	return &ToolEntry{Exposed: exposed, Server: server, Name: t.Name, Description: desc,
		ReadOnly: readOnly, Raw: raw, src: t.Raw, visible: visible, series: new(metrics.ToolSeries)}, nil
}

// jsonArray writes JSON values, each valid on its own, as one JSON array.
func jsonArray[T ~[]byte](values []T) []byte {
	n := 2
	for _, v := range values {
		n += len(v) + 1
	}
	buf := make([]byte, 0, n)
	buf = append(buf, '[')
	for i, v := range values {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, v...)
	}
	return append(buf, ']')
}

// Lookup returns the tool exposed as name, listed or not.
func (c *Catalog) Lookup(name string) (*ToolEntry, bool) {
	e, ok := c.byName[name]
	return e, ok
}

// Tools returns every entry, sorted by exposed name. The slice is shared:
// callers must not modify it.
func (c *Catalog) Tools() []*ToolEntry { return c.tools }

// ListedTools counts, by server, the tools tools/list shows before any
// agent's policy: the server is connected (or within its reconnect
// window), its tools.include/exclude keep the tool, and tool integrity does
// not hold it. A server with none has no entry.
func (c *Catalog) ListedTools() map[string]int {
	n := map[string]int{}
	for _, e := range c.tools {
		if e.listed() {
			n[e.Server]++
		}
	}
	return n
}

// Warnings are the naming and rewrite warnings of this build.
func (c *Catalog) Warnings() []string { return c.warnings }
