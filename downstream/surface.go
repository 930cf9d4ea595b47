package downstream

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// The rest of the MCP surface (docs/resources.md#resources-and-prompts): resources, resource templates and
// prompts of every server, merged under namespaced names and URIs. Like
// tools, they keep the upstream's bytes; only the name or URI changes.

// itemEntry is one resource, template or prompt as the proxy exposes it.
type itemEntry struct {
	Server string
	Key    string          // exposed URI, URI template or prompt name
	Orig   string          // the upstream's own
	Raw    json.RawMessage // the upstream's object with Key in place of Orig
}

// surface is the merged resources, templates and prompts of one catalog.
type surface struct {
	resources []*itemEntry
	templates []*itemEntry
	prompts   []*itemEntry
	byPrompt  map[string]*itemEntry
	// bare maps the URIs a `prefix: ""` server exposes unprefixed to that
	// server; bareServers are those servers (they may also own URIs that
	// only a template of theirs describes).
	bare        map[string]string
	bareServers []string
	// resourcesJSON, templatesJSON and promptsJSON are the full lists, to
	// tell whether a rebuild changed what clients see.
	resourcesJSON, templatesJSON, promptsJSON []byte
	// promptNames is the name table the prompts were named with, which the
	// next build keeps names from.
	promptNames *namespace.Table
}

// surfaceServer is one server's input to a surface build.
type surfaceServer struct {
	name               string
	rank               int // the server's place in config order
	prefix             string
	connected          bool
	resources, prompts bool // advertised and allowed (tools.resources / tools.prompts)
	snapResources      []json.RawMessage
	snapTemplates      []json.RawMessage
	snapPrompts        []json.RawMessage
}

// buildSurface merges the servers' resources, templates and prompts.
// Prompt names follow the tools' scheme and keep the names prev (nil:
// none) gave them, as tools do (docs/agents.md#names).
func buildSurface(style namespace.Style, servers []surfaceServer, prev *surface) (*surface, []string) {
	s := &surface{byPrompt: map[string]*itemEntry{}, bare: map[string]string{}}
	// A `prefix: ""` server's resource URIs stay bare, like its tool names,
	// unless another such server lists the same URI: then both fall back
	// to <server>+<uri> (the rule for bare names, docs/resources.md#resources-and-prompts).
	bareCount := map[string]int{}
	for _, sv := range servers {
		if sv.connected && sv.resources && sv.prefix == "" {
			for _, raw := range sv.snapResources {
				if uri, err := stringMember(raw, "uri"); err == nil {
					bareCount[uri]++
				}
			}
		}
	}
	var warnings []string
	var inputs []namespace.Input
	promptRaw := map[string]map[string]json.RawMessage{}
	promptOrder := map[string]int{} // server NUL upstream name -> place in the server's list
	for _, sv := range servers {
		if !sv.connected {
			continue
		}
		if sv.resources {
			if sv.prefix == "" {
				s.bareServers = append(s.bareServers, sv.name)
			}
			for _, raw := range sv.snapResources {
				if uri, err := stringMember(raw, "uri"); err == nil && sv.prefix == "" && bareCount[uri] == 1 {
					s.resources = append(s.resources, &itemEntry{Server: sv.name, Key: uri, Orig: uri, Raw: compactLines(raw)})
					s.bare[uri] = sv.name
					continue
				}
				if e, err := wrapItem(sv.name, raw, "uri"); err == nil {
					s.resources = append(s.resources, e)
				} else {
					warnings = append(warnings, fmt.Sprintf("server %s: resource skipped: %v", sv.name, err))
				}
			}
			for _, raw := range sv.snapTemplates {
				if sv.prefix == "" {
					if tpl, err := stringMember(raw, "uriTemplate"); err == nil {
						s.templates = append(s.templates, &itemEntry{Server: sv.name, Key: tpl, Orig: tpl, Raw: compactLines(raw)})
					}
					continue
				}
				if e, err := wrapItem(sv.name, raw, "uriTemplate"); err == nil {
					s.templates = append(s.templates, e)
				} else {
					warnings = append(warnings, fmt.Sprintf("server %s: resource template skipped: %v", sv.name, err))
				}
			}
		}
		if sv.prompts {
			in := namespace.Input{Server: sv.name, Prefix: sv.prefix}
			promptRaw[sv.name] = map[string]json.RawMessage{}
			for _, raw := range sv.snapPrompts {
				name, err := stringMember(raw, "name")
				if err != nil {
					warnings = append(warnings, fmt.Sprintf("server %s: prompt skipped: %v", sv.name, err))
					continue
				}
				if _, dup := promptOrder[subKey(sv.name, name)]; !dup {
					promptOrder[subKey(sv.name, name)] = len(in.Names)
				}
				in.Names = append(in.Names, name)
				promptRaw[sv.name][name] = raw
			}
			inputs = append(inputs, in)
		}
	}
	var prevNames *namespace.Table
	if prev != nil {
		prevNames = prev.promptNames
	}
	table, w := namespace.Rebuild(style, inputs, prevNames)
	s.promptNames = table
	warnings = append(warnings, w...)
	for _, r := range table.Routes() {
		raw, err := rawjson.Set(compactLines(promptRaw[r.Server][r.Name]), "name", rawjson.String(r.Exposed))
		if err != nil {
			continue
		}
		e := &itemEntry{Server: r.Server, Key: r.Exposed, Orig: r.Name, Raw: raw}
		s.prompts = append(s.prompts, e)
		s.byPrompt[r.Exposed] = e
	}
	s.inListOrder(servers, promptOrder)
	s.resourcesJSON = joinItems(s.resources, nil)
	s.templatesJSON = joinItems(s.templates, nil)
	s.promptsJSON = joinItems(s.prompts, nil)
	return s, warnings
}

// inListOrder puts the merged lists in list order: servers in config order
// (their rank), each server's items in the server's own order
// (docs/protocol.md#list-order-and-cache-hints). Resources and templates
// were appended in each server's order; prompts come from the name table,
// and promptOrder has each one's place in its server's list.
func (s *surface) inListOrder(servers []surfaceServer, promptOrder map[string]int) {
	rank := make(map[string]int, len(servers))
	for _, sv := range servers {
		rank[sv.name] = sv.rank
	}
	byRank := func(a, b *itemEntry) int { return cmp.Compare(rank[a.Server], rank[b.Server]) }
	slices.SortStableFunc(s.resources, byRank)
	slices.SortStableFunc(s.templates, byRank)
	slices.SortStableFunc(s.prompts, func(a, b *itemEntry) int {
		if c := byRank(a, b); c != 0 {
			return c
		}
		return cmp.Compare(promptOrder[subKey(a.Server, a.Orig)], promptOrder[subKey(b.Server, b.Orig)])
	})
}

// route finds the server of a URI a client sent: the prefixed forms of
// docs/resources.md#resources-and-prompts (either), a bare URI a `prefix: ""` server listed, or a bare URI
// one of its templates describes (the text before the template's first
// '{' must start it); with several such servers matching, none.
func (s *surface) route(uri string, servers []string) (srv, orig string, bare, ok bool) {
	if srv, orig, ok := namespace.ParseURI(uri, servers); ok {
		return srv, orig, false, true
	}
	if srv, ok := s.bare[uri]; ok {
		return srv, uri, true, true
	}
	match := ""
	for _, t := range s.templates {
		if t.Key != t.Orig || !slices.Contains(s.bareServers, t.Server) {
			continue
		}
		head, _, _ := strings.Cut(t.Orig, "{")
		if head != "" && strings.HasPrefix(uri, head) && t.Server != match {
			if match != "" {
				return "", "", false, false
			}
			match = t.Server
		}
	}
	if match == "" && len(s.bareServers) == 1 {
		match = s.bareServers[0]
	}
	return match, uri, true, match != ""
}

// wrapItem rewrites a resource's "uri" or a template's "uriTemplate" to
// the native proxied form <server>+<uri> (docs/resources.md#resources-and-prompts).
func wrapItem(server string, raw json.RawMessage, member string) (*itemEntry, error) {
	orig, err := stringMember(raw, member)
	if err != nil {
		return nil, err
	}
	key := namespace.WrapURI(server, orig)
	out, err := rawjson.Set(compactLines(raw), member, rawjson.String(key))
	if err != nil {
		return nil, err
	}
	return &itemEntry{Server: server, Key: key, Orig: orig, Raw: out}, nil
}

// stringMember reads a string member of an object.
func stringMember(raw json.RawMessage, key string) (string, error) {
	v, ok, err := rawjson.Get(raw, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("no string %q", key)
	}
	s, err := rawjson.Unquote(v) // decodes as encoding/json does, without its reflection
	if err != nil || s == "" {
		return "", fmt.Errorf("no string %q", key)
	}
	return s, nil
}

// joinItems writes the Raw of the entries that pass keep (nil = all) as one
// JSON array.
func joinItems(items []*itemEntry, keep func(*itemEntry) bool) []byte {
	var raws []json.RawMessage
	for _, e := range items {
		if keep == nil || keep(e) {
			raws = append(raws, e.Raw)
		}
	}
	return jsonArray(raws)
}

// wrapContentsURIs rewrites the "uri" of each item of a resources/read
// result's contents to the prefixed form the client asked with (docs/resources.md#resources-and-prompts).
func wrapContentsURIs(result json.RawMessage, server string, seedForm bool) json.RawMessage {
	return mapItems(result, "contents", func(item json.RawMessage) (json.RawMessage, bool) {
		uri, err := stringMember(item, "uri")
		if err != nil {
			return nil, false
		}
		wrapped := namespace.WrapURI(server, uri)
		if seedForm {
			wrapped = namespace.WrapSeedURI(server, uri)
		}
		out, err := rawjson.Set(item, "uri", rawjson.String(wrapped))
		return out, err == nil
	})
}
