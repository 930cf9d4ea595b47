package downstream

import (
	"bytes"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-proxy/mcp-proxy/blobs"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// rawContent is a content item that marshals to the upstream's bytes.
// Embedding mcp.TextContent satisfies mcp.Content's unexported method.
type rawContent struct {
	mcp.TextContent
	raw json.RawMessage
}

func (r rawContent) MarshalJSON() ([]byte, error) { return r.raw, nil }

// typedResult converts a raw tools/call result into mcp-go's type for the
// few requests that do not pass the wire layer. Content items, structured
// content and _meta values keep their bytes; unknown top-level members are
// lost on this path.
func typedResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	var r struct {
		Meta       map[string]json.RawMessage `json:"_meta"`
		Content    []json.RawMessage          `json:"content"`
		Structured json.RawMessage            `json:"structuredContent"`
		IsError    bool                       `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &wireError{Code: codeInternal, Message: "upstream sent an invalid tools/call result"}
	}
	out := &mcp.CallToolResult{IsError: r.IsError, RawStructuredContent: r.Structured, Content: []mcp.Content{}}
	if len(r.Meta) > 0 {
		fields := make(map[string]any, len(r.Meta))
		for k, v := range r.Meta {
			fields[k] = v
		}
		out.Meta = &mcp.Meta{AdditionalFields: fields}
	}
	for _, c := range r.Content {
		out.Content = append(out.Content, rawContent{raw: c})
	}
	return out, nil
}

// compactLines removes the whitespace newlines of a raw JSON value. An HTTP
// upstream may pretty-print; stdio and SSE framing downstream need one line.
func compactLines(raw json.RawMessage) json.RawMessage {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return raw
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// stripResultTags removes Unicode TAG characters (SPEC §9.4) from the text of
// a result's text items and embedded text resources. A result without any
// is returned as it is after one scan.
func stripResultTags(result json.RawMessage) json.RawMessage {
	if !mayHaveTags(result) {
		return result
	}
	content, ok, err := rawjson.Get(result, "content")
	if err != nil || !ok {
		return result
	}
	var items []json.RawMessage
	if json.Unmarshal(content, &items) != nil {
		return result
	}
	changed := false
	for i, item := range items {
		if out, ok := stripItemTags(item); ok {
			items[i], changed = out, true
		}
	}
	if !changed {
		return result
	}
	out, err := rawjson.Set(result, "content", jsonArray(items))
	if err != nil {
		return result
	}
	return out
}

// stripItemTags strips TAG characters from one content item's text.
func stripItemTags(item json.RawMessage) (json.RawMessage, bool) {
	if out, ok := stripMemberTags(item, "text"); ok {
		return out, true
	}
	res, ok, err := rawjson.Get(item, "resource")
	if err != nil || !ok || len(res) == 0 || res[0] != '{' {
		return nil, false
	}
	newRes, ok := stripMemberTags(res, "text")
	if !ok {
		return nil, false
	}
	out, err := rawjson.Set(item, "resource", newRes)
	return out, err == nil
}

func stripMemberTags(obj json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok, err := rawjson.Get(obj, key)
	if err != nil || !ok || !mayHaveTags(v) {
		return nil, false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return nil, false
	}
	clean := sanitize.StripTags(s)
	if clean == s {
		return nil, false
	}
	out, err := rawjson.Set(obj, key, rawjson.String(clean))
	return out, err == nil
}

// mayHaveTags reports whether b may hold a TAG character (U+E0000–U+E007F):
// raw UTF-8 (F3 A0 80/81 ..) or a JSON escape of its high surrogate \uDB40.
func mayHaveTags(b []byte) bool {
	if bytes.Contains(b, []byte("\xf3\xa0\x80")) || bytes.Contains(b, []byte("\xf3\xa0\x81")) {
		return true
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i+4 <= len(b) && bytes.EqualFold(b[i:i+4], []byte("db40")) {
			return true
		}
	}
}

// recordBlobs counts a result's blob outcomes.
func (p *Proxy) recordBlobs(server string, r blobs.Report) {
	for _, o := range r.Blobs {
		p.opts.Metrics.Blob(server, o.Result, o.Bytes)
	}
}
