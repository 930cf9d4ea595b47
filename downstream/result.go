package downstream

import (
	"bytes"
	"encoding/json"

	"github.com/mcp-proxy/mcp-proxy/blobs"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

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

// stripResultTags removes Unicode TAG characters (docs/protocol.md#fidelity) from the text of
// a result's text items and embedded text resources. A result without any
// is returned as it is after one scan.
func stripResultTags(result json.RawMessage) json.RawMessage {
	if !mayHaveTags(result) {
		return result
	}
	return mapItems(result, "content", stripItemTags)
}

// mapItems returns result with each item of its array member key replaced
// by what rewrite returns for it (false: the item stays as it is). A
// result where that member is missing or not an array, or where no item
// changed, is returned as it is.
func mapItems(result json.RawMessage, key string, rewrite func(item json.RawMessage) (json.RawMessage, bool)) json.RawMessage {
	arr, ok, err := rawjson.Get(result, key)
	if err != nil || !ok {
		return result
	}
	var items []json.RawMessage
	if json.Unmarshal(arr, &items) != nil {
		return result
	}
	changed := false
	for i, item := range items {
		if out, ok := rewrite(item); ok {
			items[i], changed = out, true
		}
	}
	if !changed {
		return result
	}
	out, err := rawjson.Set(result, key, jsonArray(items))
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
func (tc *toolCalls) recordBlobs(server string, r blobs.Report) {
	for _, o := range r.Blobs {
		tc.opts.Metrics.Blob(server, o.Result, o.Bytes)
	}
}

// rewriteResult applies the result rewrites of docs/resources.md#blobs and docs/protocol.md#fidelity: blobs to
// files, Unicode TAG characters out of text. Both return the input slice when
// there is nothing to change, which is the common case.
func (tc *toolCalls) rewriteResult(agent, server string, result json.RawMessage, linkOK bool) json.RawMessage {
	if tc.opts.Blobs != nil {
		out, report, err := tc.opts.Blobs.Rewrite(agent, result, linkOK)
		if err != nil {
			tc.log.Warn().Str("server", server).Err(err).Msg("blob rewrite failed; result passed through")
		} else {
			result = out
			tc.recordBlobs(server, report)
		}
	}
	return stripResultTags(compactLines(result))
}
