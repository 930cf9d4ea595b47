package blobs

import (
	"bytes"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// The blob items of a result are found with a rawjson.Reader: a lax one (the result is the value
// of a message the upstream side parsed, and the text of most results is one long string, which
// it delimits without checking), so that a result without blob items costs about one search for
// the end of each string. Rewrite validates the result in full before it splices anything. On a
// result that is not JSON, the items are those read before the point where it stops being
// JSON, the one being read then included, with a string the end cuts short running to the end.

// span is a half-open byte range [start, end) of the input. For a string it includes the quotes.
type span struct{ start, end int }

// ok reports whether the span was set (a value found).
func (s span) ok() bool { return s.end > s.start }

// findBlobs returns the blob items of every "content" array of the result object b, in order.
// A duplicated "content" key has all its arrays read: parsers disagree on which one wins. A b
// that is not an object has none. When b is not JSON, the items found before its fault are
// returned with an error.
func findBlobs(b []byte, media bool) ([]blobItem, error) {
	if i := rawjson.SkipSpace(b, 0); i >= len(b) || b[i] != '{' {
		return nil, nil
	}
	var items []blobItem
	r := rawjson.NewLaxReader(b)
	end, err := r.Fields(0, func(name []byte, vs int) (int, error) {
		if vs >= len(b) || b[vs] != '[' || !rawjson.Equal(name, "content") {
			return r.Skip(vs)
		}
		return r.Array(vs, func(es int) (int, error) {
			if es >= len(b) || b[es] != '{' {
				return r.Skip(es)
			}
			it, end, err := parseItem(r, es, media)
			if it.kind != 0 {
				items = append(items, it)
			}
			return end, err
		})
	})
	if err == nil {
		err = r.End(end)
	}
	return items, err
}

// parseItem reads the content item, an object, at offset at of r's document, and returns it as
// a blob item (kind 0 when it is none) and the offset after it. When a key repeats, its last
// value counts, as in JSON.parse and encoding/json. On an error the item is what was read
// before it.
func parseItem(r *rawjson.Reader, at int, media bool) (blobItem, int, error) {
	b := r.Bytes()
	var typ, resource, data, mimeType span
	var res resourceMembers // of the last "resource" that is an object
	end, err := r.Fields(at, func(name []byte, vs int) (int, error) {
		if vs < len(b) && b[vs] == '{' && rawjson.Equal(name, "resource") {
			var inner resourceMembers
			end, err := inner.read(r, vs)
			resource, res = valueSpan(b, vs, end, err), inner
			return end, err
		}
		end, err := r.Skip(vs)
		v := valueSpan(b, vs, end, err)
		switch {
		case rawjson.Equal(name, "type"):
			typ = v
		case rawjson.Equal(name, "resource"):
			resource = v
		case rawjson.Equal(name, "data"):
			data = v
		case rawjson.Equal(name, "mimeType"):
			mimeType = v
		}
		return end, err
	})
	it := blobItem{item: valueSpan(b, at, end, err)}
	switch {
	case strEq(b, typ, "resource"):
		if !resource.ok() || b[resource.start] != '{' || !isString(b, res.blob) {
			return blobItem{}, end, err
		}
		it.kind, it.data, it.uri, it.mime = kindResource, res.blob, res.uri, res.mime
	case media && strEq(b, typ, "image"):
		it.kind, it.data, it.mime = kindImage, data, mimeType
	case media && strEq(b, typ, "audio"):
		it.kind, it.data, it.mime = kindAudio, data, mimeType
	default:
		return blobItem{}, end, err
	}
	if !isString(b, it.data) {
		return blobItem{}, end, err
	}
	if !isString(b, it.uri) {
		it.uri = span{}
	}
	if !isString(b, it.mime) {
		it.mime = span{}
	}
	return it, end, err
}

// valueSpan is the span of the value at vs that a read ending at end with err delimits: when
// the read failed, an object or string the end of b cuts short runs to that end (anything else
// is unset).
func valueSpan(b []byte, vs, end int, err error) span {
	switch {
	case err == nil:
		return span{vs, end}
	case vs < len(b) && (b[vs] == '"' || b[vs] == '{'):
		return span{vs, len(b)}
	}
	return span{}
}

// resourceMembers are the members of a resource object that a blob item uses.
type resourceMembers struct{ blob, uri, mime span }

// read reads the resource object at offset at and returns the offset after it.
func (m *resourceMembers) read(r *rawjson.Reader, at int) (int, error) {
	return r.Fields(at, func(name []byte, vs int) (int, error) {
		end, err := r.Skip(vs)
		v := valueSpan(r.Bytes(), vs, end, err)
		switch {
		case rawjson.Equal(name, "blob"):
			m.blob = v
		case rawjson.Equal(name, "uri"):
			m.uri = v
		case rawjson.Equal(name, "mimeType"):
			m.mime = v
		}
		return end, err
	})
}

// isString reports whether s is a string literal.
func isString(b []byte, s span) bool {
	return s.end-s.start >= 2 && b[s.start] == '"'
}

// literal returns the string literal s, quotes included.
func literal(b []byte, s span) []byte {
	return b[s.start:s.end]
}

// body returns the bytes between the quotes of the string literal s.
func body(b []byte, s span) []byte {
	return b[s.start+1 : s.end-1]
}

// strEq reports whether s is a string literal that decodes to want.
func strEq(b []byte, s span, want string) bool {
	return isString(b, s) && rawjson.Equal(literal(b, s), want)
}

// decodeString returns the value of the string literal s. One without escapes is its bytes as
// they are, invalid UTF-8 included (names and MIME types are cleaned from those).
func decodeString(b []byte, s span) (string, bool) {
	if !isString(b, s) {
		return "", false
	}
	if raw := body(b, s); bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), true
	}
	out, err := rawjson.Unquote(literal(b, s))
	return out, err == nil
}
