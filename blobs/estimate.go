package blobs

import (
	"bytes"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// sizeEstimate estimates the decoded size of base64 text fed to it in chunks, without decoding:
// len/4*3 minus the padding (docs/resources.md#blobs). Line breaks count toward len, so text wrapped in lines
// is over-estimated by up to 3/4 of a byte per break; for valid base64 the estimate is never
// below the decoded size, and equals it when the text has no line breaks.
type sizeEstimate struct {
	n   int64 // characters seen
	pad int64 // '=' characters at the end, ignoring line breaks
}

// add feeds the next chunk of base64 text.
func (e *sizeEstimate) add(p []byte) {
	e.n += int64(len(p))
	var pad int64
	for i := len(p) - 1; i >= 0; i-- {
		switch p[i] {
		case '=':
			pad++
		case '\r', '\n':
		default:
			e.pad = pad
			return
		}
	}
	// The whole chunk was padding or line breaks: it extends the padding seen before.
	e.pad += pad
}

// decoded returns the estimated decoded size. Padding counts at most 2, the most valid base64
// has; text that is too short for its padding estimates 0.
func (e *sizeEstimate) decoded() int64 {
	d := e.n/4*3 - min(e.pad, 2)
	return max(d, 0)
}

// estimateBase64 estimates the decoded size of plain base64 text.
func estimateBase64(text []byte) int64 {
	var e sizeEstimate
	e.add(text)
	return e.decoded()
}

// estimateJSONString estimates the decoded size of the base64 text held in a JSON string
// literal (quotes included), un-escaping it first when it holds escapes.
func estimateJSONString(lit []byte) int64 {
	if raw := lit[1 : len(lit)-1]; bytes.IndexByte(raw, '\\') < 0 {
		return estimateBase64(raw)
	}
	var e sizeEstimate
	var buf [4096]byte
	r := rawjson.NewStringReader(lit)
	for {
		n, err := r.Read(buf[:])
		e.add(buf[:n])
		if err != nil {
			// io.EOF, or a malformed escape, which cannot happen in a literal of valid JSON;
			// either way the text seen so far is what is estimated.
			return e.decoded()
		}
	}
}
