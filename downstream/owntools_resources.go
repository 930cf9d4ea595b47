package downstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/namespace"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The own tools mcp_resources and mcp_prompts (docs/resources.md#resources-and-prompts), for hosts that
// only use tools. Everything they return is untrusted upstream content:
// wrapped with its provenance, sanitized, and cut per item.

const (
	mcpResourcesName = "mcp_resources"
	mcpPromptsName   = "mcp_prompts"
)

var (
	mcpResourcesDef = []byte(`{"name":"mcp_resources","description":"List or read the resources of the connected MCP servers. ` +
		`action list (optionally for one server, with its cursor) returns resources with <server>__<uri> URIs; action read with such a uri returns its content.",` +
		`"inputSchema":{"type":"object","properties":{"action":{"type":"string","enum":["list","read"]},` +
		`"server":{"type":"string","description":"List one server's resources, page by page."},` +
		`"cursor":{"type":"string","description":"next_cursor of the previous page of that server."},` +
		`"uri":{"type":"string","description":"The <server>__<uri> of the resource to read."}},"required":["action"]},` +
		`"annotations":{"title":"MCP resources","readOnlyHint":true}}`)
	mcpPromptsDef = []byte(`{"name":"mcp_prompts","description":"List the prompts of the connected MCP servers, or get one rendered with its arguments. ` +
		`Prompt names are <server>__<name>.","inputSchema":{"type":"object","properties":{"action":{"type":"string","enum":["list","get"]},` +
		`"server":{"type":"string","description":"List one server's prompts, page by page."},` +
		`"cursor":{"type":"string","description":"next_cursor of the previous page of that server."},` +
		`"name":{"type":"string","description":"The <server>__<name> of the prompt to get."},` +
		`"arguments":{"type":"object","description":"The prompt's arguments."}},"required":["action"]},` +
		`"annotations":{"title":"MCP prompts","readOnlyHint":true}}`)
)

// resourceToolOffered reports whether the session lists mcp_resources (resp.
// mcp_prompts): a granted server offers and allows resources (prompts), and
// rules 3–5 let the agent call it (docs/agents.md#the-policy-rules, docs/resources.md#resources-and-prompts). from as for
// resourceToolServers.
func (o *ownTools) resourceToolOffered(st *session, name string, from *builtFrom) bool {
	if name != mcpResourcesName && name != mcpPromptsName {
		return false
	}
	if st.agent.Decide(filter.Tool{Exposed: name}, st.perCall) != filter.RuleNone {
		return false
	}
	return len(o.resourceToolServers(st, name == mcpResourcesName, from)) > 0
}

// resourceToolServers are the granted, connected servers offering resources (or
// prompts) that the config allows, sorted: as they are now (from nil), or
// as a catalog build read them.
func (o *ownTools) resourceToolServers(st *session, resources bool, from *builtFrom) []string {
	g := o.gen()
	if from != nil {
		g = from.g
	}
	var out []string
	for _, name := range g.serverNames() {
		cfg, up := g.cfg.Servers[name], g.ups[name]
		if cfg == nil || up == nil || !st.agent.Granted(name) {
			continue
		}
		var s *upstream.Snapshot
		if from != nil {
			s = from.snaps[name]
		}
		if s == nil {
			s = up.Snapshot()
		}
		if !s.Listed() { // connected, or within reconnect_wait of a drop
			continue
		}
		if resources && s.Capabilities.Resources && cfg.ResourcesEnabled() || !resources && s.Capabilities.Prompts && cfg.PromptsEnabled() {
			out = append(out, name)
		}
	}
	return out
}

// resourceToolArgs are the arguments of both tools.
type resourceToolArgs struct {
	Action    string          `json:"action"`
	Server    string          `json:"server"`
	Cursor    string          `json:"cursor"`
	URI       string          `json:"uri"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func errorText(s string) json.RawMessage { return textResult(s, true) }

// resourceTool runs mcp_resources (resources) or mcp_prompts: list, and
// read a resource or get a prompt.
func (o *ownTools) resourceTool(ctx context.Context, r *request, args json.RawMessage, resources bool) json.RawMessage {
	var in resourceToolArgs
	if len(args) > 0 && json.Unmarshal(args, &in) != nil {
		return errorText("arguments must be an object")
	}
	switch {
	case in.Action == "list":
		return o.listForTool(ctx, r, in, resources)
	case resources && in.Action == "read":
		return o.readForTool(ctx, r, in.URI)
	case !resources && in.Action == "get":
		return o.getForTool(ctx, r, in)
	case resources:
		return errorText("missing required `action` (list|read)")
	}
	return errorText("missing required `action` (list|get)")
}

// listForTool lists resources (or prompts): every server's from the catalog,
// or one server's page through its own cursor.
func (o *ownTools) listForTool(ctx context.Context, r *request, in resourceToolArgs, resources bool) json.RawMessage {
	st := r.sess
	kind, member, key := "prompts", "prompts", "name"
	if resources {
		kind, member, key = "resources", "resources", "uri"
	}
	if in.Server == "" {
		if in.Cursor != "" {
			return errorText("`cursor` requires a `server` (pagination is per-server); omit `cursor` for an all-server list")
		}
		var items []json.RawMessage
		for _, srv := range o.resourceToolServers(st, resources, nil) {
			snap := o.gen().ups[srv].Snapshot()
			list := snap.Prompts
			if resources {
				list = snap.Resources
			}
			for _, raw := range list {
				if out, ok := prefixedItem(srv, raw, key, resources); ok {
					items = append(items, o.untrustedJSON(out, key))
				}
			}
		}
		return textResult(string(jsonArray(items)), false)
	}
	if werr := o.checkToolServer(st, in.Server, resources); werr != "" {
		return errorText(werr)
	}
	params := []byte(`{}`)
	if in.Cursor != "" {
		params, _ = rawjson.Set(params, "cursor", rawjson.String(in.Cursor))
	}
	up := o.gen().ups[in.Server]
	res, werr := o.forward(ctx, r, in.Server, up, kind+"/list", params)
	if werr != nil {
		return errorText(werr.Message)
	}
	var page struct {
		Items      []json.RawMessage `json:"-"`
		NextCursor *string           `json:"nextCursor"`
	}
	_ = json.Unmarshal(res, &page)
	listRaw, _, _ := rawjson.Get(res, member)
	var raws []json.RawMessage
	_ = json.Unmarshal(listRaw, &raws)
	var items []json.RawMessage
	for _, raw := range raws {
		if out, ok := prefixedItem(in.Server, raw, key, resources); ok {
			items = append(items, o.untrustedJSON(out, key))
		}
	}
	out := []byte(`{}`)
	out, _ = rawjson.Set(out, member, jsonArray(items))
	next := []byte("null")
	if page.NextCursor != nil && *page.NextCursor != "" {
		next = rawjson.String(*page.NextCursor)
	}
	out, _ = rawjson.Set(out, "next_cursor", next)
	return textResult(string(out), false)
}

// prefixedItem rewrites a resource's uri (or a prompt's name) to <server>__x.
func prefixedItem(srv string, raw json.RawMessage, key string, resources bool) (json.RawMessage, bool) {
	v, err := stringMember(raw, key)
	if err != nil {
		return nil, false
	}
	wrapped := srv + "__" + v
	if resources {
		wrapped = namespace.WrapSeedURI(srv, v)
	}
	out, err := rawjson.Set(compactLines(raw), key, rawjson.String(wrapped))
	return out, err == nil
}

// untrustedJSON is an upstream item of a list with every string, keys
// included, sanitized as untrusted text is (docs/resources.md#resources-and-prompts, docs/protocol.md#errors: secrets
// redacted, TAG characters stripped, whether written raw or escaped), its
// members in their order. The item's own member id (its uri, or a prompt's
// name) only loses TAG characters: it is what the client sends back, and
// the sanitizer would cut a URI's query. Numbers keep their digits. An item
// that does not decode is returned as it is (prefixedItem read it already).
func (o *ownTools) untrustedJSON(item json.RawMessage, id string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(item))
	dec.UseNumber()
	var out []byte
	type level struct {
		object bool
		n      int // tokens written in it: in an object, keys and values
	}
	var stack []level
	key := "" // the item's member being written
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			return item
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			out, stack = append(out, byte(d)), stack[:len(stack)-1]
			continue
		}
		isID := false
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.object && top.n%2 == 1:
				out = append(out, ':')
				isID = len(stack) == 1 && key == id
			case top.n > 0:
				out = append(out, ',')
			}
			if s, ok := tok.(string); ok && len(stack) == 1 && top.object && top.n%2 == 0 {
				key = s
			}
			top.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out, stack = append(out, byte(v)), append(stack, level{object: v == '{'})
		case string:
			if !isID {
				v = o.cleanText(v)
			}
			out = rawjson.AppendString(out, sanitize.StripTags(v))
		case json.Number:
			out = append(out, v...)
		case bool:
			out = strconv.AppendBool(out, v)
		case nil:
			out = append(out, "null"...)
		}
	}
}

// checkToolServer validates a server named in the tools' arguments.
func (o *ownTools) checkToolServer(st *session, srv string, resources bool) string {
	g := o.gen()
	if g.cfg.Servers[srv] == nil || g.ups[srv] == nil || !st.agent.Granted(srv) {
		return "unknown MCP server `" + sanitize.Error(srv) + "`"
	}
	if !slices.Contains(o.resourceToolServers(st, resources, nil), srv) {
		if werr := o.serverUp(srv); werr != nil {
			return werr.Message
		}
		if resources {
			return "MCP server `" + srv + "` does not support resources"
		}
		return "MCP server `" + srv + "` does not support prompts"
	}
	return ""
}

// splitPrefixed splits "<server>__<rest>" for a granted server.
func (o *ownTools) splitPrefixed(st *session, x string) (srv, rest string, errText string) {
	srv, rest, ok := namespace.ParseURI(x, o.gen().serverNames())
	if !ok {
		if before, _, found := strings.Cut(x, "__"); found && before != "" {
			return "", "", "unknown MCP server `" + sanitize.Error(before) + "`"
		}
		return "", "", "missing server prefix in `" + sanitize.Error(x) + "`"
	}
	return srv, rest, ""
}

// readForTool reads one resource and wraps each content item (docs/resources.md#resources-and-prompts).
func (o *ownTools) readForTool(ctx context.Context, r *request, uri string) json.RawMessage {
	st := r.sess
	srv, orig, errText := o.splitPrefixed(st, uri)
	if errText != "" {
		return errorText(errText)
	}
	if msg := o.checkToolServer(st, srv, true); msg != "" {
		return errorText(msg)
	}
	params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(orig))
	res, werr := o.forward(ctx, r, srv, o.gen().ups[srv], "resources/read", params)
	if werr != nil {
		return errorText(werr.Message)
	}
	return textResult(o.renderContents(srv, orig, res), false)
}

// renderContents wraps a resources/read result's items as untrusted text.
func (o *ownTools) renderContents(srv, uri string, res json.RawMessage) string {
	var r struct {
		Contents []struct {
			URI      string  `json:"uri"`
			MimeType string  `json:"mimeType"`
			Text     *string `json:"text"`
			Blob     *string `json:"blob"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(res, &r)
	var b strings.Builder
	for i, c := range r.Contents {
		if i > 0 {
			b.WriteByte('\n')
		}
		itemURI := c.URI
		if itemURI == "" {
			itemURI = uri
		}
		mime := c.MimeType
		fmt.Fprintf(&b, `<mcp-resource server="%s" uri="%s" mime="%s" trust="untrusted-external">`+"\n",
			attr(srv), attr(sanitize.StripTags(itemURI)), attr(sanitize.StripTags(o.cleanText(mime))))
		switch {
		case c.Text != nil:
			b.WriteString(o.untrusted(*c.Text))
		case c.Blob != nil:
			n := base64.StdEncoding.DecodedLen(len(*c.Blob)) // an upper bound if it does not decode
			if raw, err := base64.StdEncoding.DecodeString(*c.Blob); err == nil {
				n = len(raw)
			}
			fmt.Fprintf(&b, "[binary blob, %d bytes, mime=%s]", n, mime)
		}
		b.WriteString("\n</mcp-resource>")
	}
	return b.String()
}

// getForTool gets one prompt and renders its messages (docs/resources.md#resources-and-prompts).
func (o *ownTools) getForTool(ctx context.Context, r *request, in resourceToolArgs) json.RawMessage {
	st := r.sess
	if len(in.Arguments) > 0 && string(in.Arguments) != "null" && in.Arguments[0] != '{' {
		return errorText("arguments must be an object")
	}
	srv, name, errText := o.splitPrefixed(st, in.Name)
	if errText != "" {
		return errorText(errText)
	}
	if msg := o.checkToolServer(st, srv, false); msg != "" {
		return errorText(msg)
	}
	params, _ := rawjson.Set([]byte(`{}`), "name", rawjson.String(name))
	if len(in.Arguments) > 0 && string(in.Arguments) != "null" {
		params, _ = rawjson.Set(params, "arguments", in.Arguments)
	}
	res, werr := o.forward(ctx, r, srv, o.gen().ups[srv], "prompts/get", params)
	if werr != nil {
		return errorText(werr.Message)
	}
	var got struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(res, &got)
	var b strings.Builder
	fmt.Fprintf(&b, `<mcp-prompt server="%s" name="%s" trust="untrusted-external">`+"\n", attr(srv), attr(sanitize.StripTags(name)))
	for _, m := range got.Messages {
		fmt.Fprintf(&b, "[%s] %s\n", m.Role, o.messageText(m.Content))
	}
	b.WriteString("</mcp-prompt>")
	return textResult(b.String(), false)
}

// messageText renders one prompt message's content.
func (o *ownTools) messageText(content json.RawMessage) string {
	var c struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		MimeType string `json:"mimeType"`
		Resource *struct {
			URI  string  `json:"uri"`
			Text *string `json:"text"`
		} `json:"resource"`
	}
	_ = json.Unmarshal(content, &c)
	switch {
	case c.Type == "text":
		return o.untrusted(c.Text)
	case c.Type == "resource" && c.Resource != nil && c.Resource.Text != nil:
		return o.untrusted(*c.Resource.Text)
	case c.MimeType != "":
		return "[" + c.Type + ", mime=" + c.MimeType + "]"
	}
	return "[" + c.Type + " content]"
}

// wrapperTags neutralizes the wrappers' own tags inside upstream text, so
// that content can neither close its wrapper nor open a forged one (with
// trust="trusted", say).
var wrapperTags = regexp.MustCompile(`(?i)<(\s*/?\s*mcp-)`)

// untrusted sanitizes upstream text and cuts it to untrusted_text_limit
// characters (docs/resources.md#resources-and-prompts).
func (o *ownTools) untrusted(s string) string {
	s = wrapperTags.ReplaceAllString(sanitize.StripTags(o.cleanText(s)), "&lt;$1")
	limit := o.gen().cfg.UntrustedTextLimit
	if r := []rune(s); limit > 0 && len(r) > limit {
		return string(r[:limit]) + fmt.Sprintf("… [truncated %d chars]", len(r)-limit)
	}
	return s
}

// attr escapes a value for the wrappers' attributes.
func attr(s string) string {
	return strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;", "\n", " ").Replace(s)
}

// pinnedInstructions reads the granted servers' pinned_resources once, when
// a session starts, and renders them for the initialize instructions
// (docs/configuration.md#servers, pinned_resources). Each is checked as the name <server>__<uri> against the agent's
// grant, excluded_tools and allowed_tools; failures are skipped with a
// warning.
func (o *ownTools) pinnedInstructions(ctx context.Context, r *request) string {
	st := r.sess
	g := o.gen()
	var parts []string
	for _, srv := range g.serverNames() {
		cfg := g.cfg.Servers[srv]
		for _, uri := range cfg.PinnedResources {
			name := namespace.WrapSeedURI(srv, uri)
			log := o.log.Warn().Str("agent", st.agent.Name).Str("server", srv).Str("uri", sanitize.Error(uri))
			if rule := st.agent.Decide(filter.Tool{Exposed: name, Server: srv, ReadOnly: true}, st.perCall); rule != filter.RuleNone {
				if rule != filter.RuleNotGranted {
					log.Str("rule", string(rule)).Msg("pinned resource skipped: denied")
				}
				continue
			}
			if !cfg.ResourcesEnabled() || g.ups[srv] == nil {
				log.Msg("pinned resource skipped: resources not allowed for this server")
				continue
			}
			params, _ := rawjson.Set([]byte(`{}`), "uri", rawjson.String(uri))
			res, werr := o.forward(ctx, r, srv, g.ups[srv], "resources/read", params)
			if werr != nil {
				log.Str("error", werr.Message).Msg("pinned resource skipped: read failed")
				continue
			}
			parts = append(parts, o.renderContents(srv, uri, res))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "## Pinned MCP Resources\n\n" + strings.Join(parts, "\n") + "\n"
}
