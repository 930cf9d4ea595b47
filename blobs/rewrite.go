package blobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Outcome results, one per blob item, for metrics (a bounded label set).
const (
	ResultWritten     = "written"     // a new file was written
	ResultReused      = "reused"      // an identical file was already there
	ResultUnavailable = "unavailable" // the file could not be stored (I/O error, symbolic link)
	ResultInvalid     = "invalid"     // not standard base64
	ResultTooLarge    = "too_large"   // over MaxBytesPerBlob
	ResultOverBudget  = "over_budget" // the result as a whole broke a limit; nothing was written
	ResultStoreFull   = "store_full"  // the agent folder cannot take it within MaxStoreBytes
)

// Outcome is what became of one blob item.
type Outcome struct {
	// Result is one of the Result* constants.
	Result string
	// Bytes is the decoded size for written and reused blobs, and the estimated decoded size
	// otherwise (0 when the count limit stopped the result before sizes were estimated).
	Bytes int64
	// Path is the absolute path of the file, for written and reused blobs.
	Path string
	// Err is why the blob was not materialized (nil for written and reused), for logging. It
	// wraps one of ErrTooManyBlobs, ErrOverBudget, ErrTooLarge, ErrInvalidBase64, ErrSymlink,
	// ErrNotRegular or an I/O error, and holds no blob content.
	Err error
}

// Report lists the outcome of every blob item of one result, in order of appearance.
type Report struct {
	Blobs []Outcome
}

// itemKind is the kind of content item a blob was found in.
type itemKind uint8

const (
	kindResource itemKind = iota + 1 // {type:"resource", resource:{blob, uri, mimeType}}
	kindImage                        // {type:"image", data, mimeType}
	kindAudio                        // {type:"audio", data, mimeType}
)

// blobItem locates one content item carrying a blob.
type blobItem struct {
	item span // the whole item, braces included
	data span // the base64 string literal, quotes included
	uri  span // string literal, or unset
	mime span // string literal, or unset
	kind itemKind
}

// Rewrite takes the raw JSON of a tools/call result object and returns it with every blob item
// replaced (docs/resources.md#blobs): the bytes of a resource blob (and, with MaterializeMedia, of an image or
// audio item) go to a file under <Dir>/<agent>/, and the item becomes a text item naming the
// file, followed by a resource_link to it when linkSupported. Everything else in the result is
// copied byte for byte from result, which is never modified.
//
// When there is nothing to rewrite (ModePassthrough, a result that is not an object, no blob
// items) it returns result itself, without checking that it is valid JSON. Items that cannot be
// materialized become "[attachment unavailable: <reason>]" text items; the Report says why, per
// blob. Rewrite fails only for an invalid agent name (ErrInvalidAgent, checked in ModeFile
// before anything else), for a result with blob items that is not valid JSON
// (ErrMalformedResult), or when the agent directory cannot be closed. It is safe for concurrent
// use.
func (m *Materializer) Rewrite(agent string, result json.RawMessage, linkSupported bool) (json.RawMessage, Report, error) {
	if m.mode == ModePassthrough {
		return result, Report{}, nil
	}
	if err := ValidateAgent(agent); err != nil {
		return nil, Report{}, err
	}
	items, err := findBlobs(result, m.media)
	if len(items) == 0 {
		// Returned as is, so its validity is not this package's concern; a result of the size
		// of a file read is not scanned twice.
		return result, Report{}, nil
	}
	// The output splices ranges found by a reader that did not check the strings.
	if err != nil || rawjson.Object(result) != nil {
		return nil, Report{}, fmt.Errorf("blobs: rewrite: %w", ErrMalformedResult)
	}
	rep := Report{Blobs: make([]Outcome, len(items))}
	repl := make([][]byte, len(items))

	if len(items) > m.limits.maxBlobs {
		err := fmt.Errorf("%d blob items, limit %d: %w", len(items), m.limits.maxBlobs, ErrTooManyBlobs)
		text := unavailableItem(fmt.Sprintf("%d attachments in one result, over the limit of %d", len(items), m.limits.maxBlobs))
		for i := range items {
			rep.Blobs[i] = Outcome{Result: ResultOverBudget, Err: err}
			repl[i] = text
		}
		return splice(result, items, repl), rep, nil
	}

	var total int64
	for i, it := range items {
		rep.Blobs[i].Bytes = estimateJSONString(literal(result, it.data))
		total += rep.Blobs[i].Bytes
	}
	if total > m.limits.maxTotal {
		err := fmt.Errorf("about %d bytes decoded in total, limit %d: %w", total, m.limits.maxTotal, ErrOverBudget)
		text := unavailableItem(fmt.Sprintf("attachments total about %d bytes, over the limit of %d bytes per result", total, m.limits.maxTotal))
		for i := range items {
			rep.Blobs[i].Result = ResultOverBudget
			rep.Blobs[i].Err = err
			repl[i] = text
		}
		return splice(result, items, repl), rep, nil
	}

	refs := make([]string, len(items))
	if err := m.materializeAll(agent, result, items, rep.Blobs, repl, refs, linkSupported); err != nil {
		return nil, Report{}, err
	}
	var stored []written
	for i, it := range items {
		if refs[i] != "" {
			stored = append(stored, written{data: it.data, ref: refs[i]})
		}
	}
	return splice(result, items, repl, structuredEdits(result, stored)...), rep, nil
}

// materializeAll stores every blob that passed the result-wide checks, filling outs, repl and,
// for the blobs stored, refs with their reference text. The agent directory is opened at the
// first blob that needs it; if that fails, every blob left is unavailable. The only error
// returned is the failure to close that directory.
func (m *Materializer) materializeAll(agent string, b []byte, items []blobItem, outs []Outcome, repl [][]byte, refs []string, linkSupported bool) error {
	var st *store
	var stErr error
	for i, it := range items {
		out := &outs[i]
		if out.Bytes > m.limits.maxPerBlob {
			out.Result = ResultTooLarge
			out.Err = fmt.Errorf("about %d bytes, limit %d: %w", out.Bytes, m.limits.maxPerBlob, ErrTooLarge)
			repl[i] = unavailableItem(fmt.Sprintf("about %d bytes, over the limit of %d bytes per attachment", out.Bytes, m.limits.maxPerBlob))
			continue
		}
		if st == nil && stErr == nil {
			if st, stErr = openStore(m.dir, agent); stErr == nil {
				st.f = m.folders.get(agent)
			}
		}
		if stErr != nil {
			out.Result, out.Err = ResultUnavailable, stErr
			repl[i] = unavailableItem("the file could not be stored")
			continue
		}
		repl[i], refs[i] = m.materialize(st, b, it, out, linkSupported)
	}
	if st != nil {
		if err := st.Close(); err != nil {
			return fmt.Errorf("blobs: close %s: %w", st.path, err)
		}
	}
	return nil
}

// materialize stores one blob, fills out, and returns the item(s) that replace it and, when
// the blob was stored, its reference text ("" otherwise).
func (m *Materializer) materialize(st *store, b []byte, it blobItem, out *Outcome, linkSupported bool) ([]byte, string) {
	name, mimeType, ext := describe(b, it)
	res, err := st.put(newBlobReader(literal(b, it.data)), ext, m.limits.maxPerBlob)
	switch {
	case errors.Is(err, ErrInvalidBase64):
		*out = Outcome{Result: ResultInvalid, Bytes: out.Bytes, Err: err}
		return unavailableItem("invalid base64 data"), ""
	case errors.Is(err, ErrTooLarge):
		*out = Outcome{Result: ResultTooLarge, Bytes: out.Bytes, Err: err}
		return unavailableItem(fmt.Sprintf("over the limit of %d bytes per attachment", m.limits.maxPerBlob)), ""
	case errors.Is(err, ErrStoreFull):
		*out = Outcome{Result: ResultStoreFull, Bytes: out.Bytes, Err: err}
		return unavailableItem(StoreFullReason), ""
	case err != nil:
		*out = Outcome{Result: ResultUnavailable, Bytes: out.Bytes, Err: err}
		return unavailableItem("the file could not be stored"), ""
	}
	*out = Outcome{Result: ResultWritten, Bytes: res.size, Path: res.path}
	if res.reused {
		out.Result = ResultReused
	}
	var text string
	if isImage(mimeType) {
		text = "[IMAGE:" + res.path + "]"
	} else {
		text = "[Document: " + name + "] " + res.path
	}
	item := textItem(text)
	if linkSupported {
		item = append(item, ',')
		item = appendResourceLink(item, res.path, name, mimeType, res.size)
	}
	return item, text
}

// describe returns the display name, MIME type and file extension of a blob item.
func describe(b []byte, it blobItem) (name, mimeType, ext string) {
	if it.mime.ok() {
		if s, ok := decodeString(b, it.mime); ok {
			mimeType = cleanMIME(s)
		}
	}
	switch it.kind {
	case kindImage, kindAudio:
		ext = mediaExt(mimeType)
		name = "image." + ext
		if it.kind == kindAudio {
			name = "audio." + ext
		}
	default:
		uri := ""
		if it.uri.ok() {
			uri, _ = decodeString(b, it.uri)
		}
		name = displayName(uri)
		ext = extOf(name)
	}
	if mimeType == "" {
		mimeType = mimeFromExt(ext)
	}
	return name, mimeType, ext
}

// splice copies b with items[i] replaced by repl[i] and every extra edit applied. The items
// are in increasing order; no two ranges overlap (extra edits lie in structuredContent, the
// items in content).
func splice(b []byte, items []blobItem, repl [][]byte, extra ...edit) []byte {
	edits := make([]edit, 0, len(items)+len(extra))
	for i, it := range items {
		edits = append(edits, edit{at: it.item, repl: repl[i]})
	}
	edits = append(edits, extra...)
	if len(extra) > 0 {
		slices.SortFunc(edits, func(x, y edit) int { return x.at.start - y.at.start })
	}
	size := len(b)
	for _, e := range edits {
		size += len(e.repl) - (e.at.end - e.at.start)
	}
	out := make([]byte, 0, size)
	prev := 0
	for _, e := range edits {
		out = append(out, b[prev:e.at.start]...)
		out = append(out, e.repl...)
		prev = e.at.end
	}
	return append(out, b[prev:]...)
}

// StoreFullReason is the reason in "[attachment unavailable: blob store full]", the text that
// replaces a blob its agent folder cannot take.
const StoreFullReason = "blob store full"

// unavailableItem is the text item that stands for a blob that was not materialized.
func unavailableItem(reason string) []byte {
	return textItem("[attachment unavailable: " + reason + "]")
}

// textItem encodes {"type":"text","text":text}.
func textItem(text string) []byte {
	out := make([]byte, 0, len(text)+32)
	out = append(out, `{"type":"text","text":`...)
	out = appendJSONString(out, text)
	return append(out, '}')
}

// appendResourceLink appends the resource_link item for a stored file.
func appendResourceLink(out []byte, path, name, mimeType string, size int64) []byte {
	out = append(out, `{"type":"resource_link","uri":`...)
	out = appendJSONString(out, fileURI(path))
	out = append(out, `,"name":`...)
	out = appendJSONString(out, name)
	out = append(out, `,"mimeType":`...)
	out = appendJSONString(out, mimeType)
	out = append(out, `,"size":`...)
	out = strconv.AppendInt(out, size, 10)
	return append(out, '}')
}

// fileURI returns the file:// URI of an absolute path, percent-encoded where a URI needs it.
func fileURI(path string) string {
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive path: file:///C:/...
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// appendJSONString appends s as a JSON string literal, escaping what JSON requires plus
// U+2028/U+2029 (which break JavaScript embedding). Invalid UTF-8 becomes U+FFFD.
func appendJSONString(out []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			out = append(out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	return append(out, '"')
}
