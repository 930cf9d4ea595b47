package blobs

import (
	"encoding/base64"
	"fmt"
	"io"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// padGuard passes base64 text through and fails once any character other than '=' or a line
// break follows a '='. encoding/base64's streaming decoder decodes its input in chunks and would
// otherwise accept padding in the middle ("QQ==QQ==") when a chunk ends right after it; with
// the guard, the stream accepts exactly what base64.StdEncoding.DecodeString accepts.
type padGuard struct {
	r      io.Reader
	padded bool
	off    int64
}

// Read implements io.Reader.
func (g *padGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	for i, c := range p[:n] {
		switch {
		case c == '=':
			g.padded = true
		case c == '\r' || c == '\n':
		case g.padded:
			return i, base64.CorruptInputError(g.off + int64(i))
		}
	}
	g.off += int64(n)
	return n, err
}

// invalidReader marks every failure of the decoding chain as ErrInvalidBase64, so that the
// copy loop can tell a bad blob from a failing disk.
type invalidReader struct{ r io.Reader }

// Read implements io.Reader.
func (v invalidReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", ErrInvalidBase64, err)
	}
	return n, err
}

// newBlobReader returns a reader of the decoded bytes of the base64 text held in the JSON
// string literal lit (quotes included), un-escaped as it is read. Any decoding failure wraps
// ErrInvalidBase64.
func newBlobReader(lit []byte) io.Reader {
	return invalidReader{base64.NewDecoder(base64.StdEncoding, &padGuard{r: rawjson.NewStringReader(lit)})}
}
