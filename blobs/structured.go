package blobs

import (
	"bytes"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// A tool with an output schema returns its result twice: as content items and as
// structuredContent (server-filesystem's read_media_file puts the image's base64 in both).
// Writing the content item's blob to a file is worth little if the structured copy still
// carries the whole base64 string to the model, so (docs/resources.md#blobs) every string in structuredContent
// equal to the data of a blob that was written to a file becomes that blob's reference text
// ("[IMAGE:<path>]" or "[Document: <name>] <path>"): still a string, so the value keeps its
// JSON type, and nothing else in structuredContent changes.

// edit replaces the bytes of span at with repl.
type edit struct {
	at   span
	repl []byte
}

// written is a blob that was stored: its base64 string literal in the result, and the
// reference text that replaced its item.
type written struct {
	data span
	ref  string
}

// structuredEdits returns the edits that replace, in every top-level "structuredContent" of
// the result b, each string value equal to the data of one of the written blobs by its
// reference text. Object keys are never replaced. It allocates only for string literals with
// escapes whose length could match.
func structuredEdits(b []byte, blobs []written) []edit {
	if len(blobs) == 0 {
		return nil
	}
	var edits []edit
	r := rawjson.NewLaxReader(b) // b is valid: Rewrite checked it
	_, _ = r.Fields(0, func(name []byte, vs int) (int, error) {
		if !rawjson.Equal(name, "structuredContent") {
			return r.Skip(vs)
		}
		return forEachString(r, vs, func(s span) {
			if ref, ok := matchBlob(b, s, blobs); ok {
				edits = append(edits, edit{at: s, repl: appendJSONString(nil, ref)})
			}
		})
	})
	return edits
}

// forEachString calls f for every string value (not object key) inside the value at offset
// at of r's document, in order, and returns the offset after that value.
func forEachString(r *rawjson.Reader, at int, f func(span)) (int, error) {
	b := r.Bytes()
	if at < len(b) {
		switch b[at] {
		case '{':
			return r.Fields(at, func(_ []byte, vs int) (int, error) { return forEachString(r, vs, f) })
		case '[':
			return r.Array(at, func(vs int) (int, error) { return forEachString(r, vs, f) })
		}
	}
	end, err := r.Skip(at)
	if err == nil && b[at] == '"' {
		f(span{at, end})
	}
	return end, err
}

// matchBlob returns the reference text of the first written blob whose data equals the string
// literal s.
func matchBlob(b []byte, s span, blobs []written) (string, bool) {
	raw := body(b, s)
	for _, w := range blobs {
		data := body(b, w.data)
		rawEscaped, dataEscaped := bytes.IndexByte(raw, '\\') >= 0, bytes.IndexByte(data, '\\') >= 0
		if !rawEscaped && !dataEscaped {
			if bytes.Equal(raw, data) {
				return w.ref, true
			}
			continue
		}
		// An escape takes 2 to 12 bytes for one character of at most 4: lengths that far
		// apart cannot hold the same text.
		if len(raw) > 6*len(data)+6 || len(data) > 6*len(raw)+6 {
			continue
		}
		x, ok1 := decodeString(b, s)
		y, ok2 := decodeString(b, w.data)
		if ok1 && ok2 && x == y {
			return w.ref, true
		}
	}
	return "", false
}
