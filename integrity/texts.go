package integrity

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// maxTextDepth bounds the nesting the text walker follows. Real tool
// schemas nest a few dozen levels at most; a deeper object is reported as
// unreadable instead of being walked.
const maxTextDepth = 512

// errTooDeep is a tool object nested deeper than maxTextDepth.
var errTooDeep = errors.New("nested deeper than " + strconv.Itoa(maxTextDepth) + " levels")

// text is one string of a tool object that the scan reads: where it is,
// its value, and the byte range of its JSON string (quotes included) in the
// object, for strip to replace.
type text struct {
	where      string
	value      string
	start, end int
}

// scannedMember reports whether the string at path is one the scan reads:
// the tool's description and title, annotations.title, and every
// description and title inside inputSchema and outputSchema (parameter
// and property descriptions at any depth).
func scannedMember(path []string) bool {
	last := path[len(path)-1]
	if last != "description" && last != "title" {
		return false
	}
	switch {
	case len(path) == 1:
		return true
	case path[0] == "annotations":
		return len(path) == 2 && last == "title"
	case path[0] == "inputSchema" || path[0] == "outputSchema":
		// A property named "description" is an object under
		// properties; only string values reach here.
		return true
	}
	return false
}

// collectTexts returns the scanned strings of one tool object, in document
// order. The object must be valid JSON (the upstream package read it so):
// the walker checks strings and structure but skips other values without
// checking them, so other input gives an error or odd texts, never a panic.
func collectTexts(obj []byte) ([]text, error) {
	w := &walker{b: obj}
	w.skipSpace()
	if w.i >= len(w.b) || w.b[w.i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	if err := w.value(0); err != nil {
		return nil, err
	}
	w.skipSpace()
	if w.i != len(w.b) {
		return nil, fmt.Errorf("data after the object at offset %d", w.i)
	}
	return w.out, nil
}

// walker is a small JSON reader that follows object keys and records the
// scanned strings. It checks syntax only as far as it needs to find value
// boundaries; the input has already been parsed by the upstream side.
type walker struct {
	b    []byte
	i    int
	path []string
	out  []text
}

func (w *walker) skipSpace() { w.i = rawjson.SkipSpace(w.b, w.i) }

func (w *walker) syntax(what string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", w.i, what)
}

func (w *walker) value(depth int) error {
	if depth > maxTextDepth {
		return errTooDeep
	}
	w.skipSpace()
	if w.i >= len(w.b) {
		return w.syntax("unexpected end")
	}
	switch c := w.b[w.i]; {
	case c == '{':
		return w.object(depth)
	case c == '[':
		return w.array(depth)
	case c == '"':
		start := w.i
		end, err := w.stringEnd()
		if err != nil {
			return err
		}
		if len(w.path) > 0 && scannedMember(w.path) {
			s, err := decodeString(w.b[start:end])
			if err != nil {
				return err
			}
			w.out = append(w.out, text{where: strings.Join(w.path, "."), value: s, start: start, end: end})
		}
		return nil
	default:
		for w.i < len(w.b) && !strings.ContainsRune(",]} \t\n\r", rune(w.b[w.i])) {
			w.i++
		}
		return nil
	}
}

func (w *walker) object(depth int) error {
	w.i++ // {
	w.skipSpace()
	if w.i < len(w.b) && w.b[w.i] == '}' {
		w.i++
		return nil
	}
	for {
		w.skipSpace()
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			return w.syntax("expected a key")
		}
		start := w.i
		end, err := w.stringEnd()
		if err != nil {
			return err
		}
		key, err := decodeString(w.b[start:end])
		if err != nil {
			return err
		}
		w.skipSpace()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return w.syntax("expected ':'")
		}
		w.i++
		w.path = append(w.path, key)
		err = w.value(depth + 1)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
		if end, err := w.separator('}'); end || err != nil {
			return err
		}
	}
}

func (w *walker) array(depth int) error {
	w.i++ // [
	w.skipSpace()
	if w.i < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return nil
	}
	for n := 0; ; n++ {
		w.path = append(w.path, "["+strconv.Itoa(n)+"]")
		err := w.value(depth + 1)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
		if end, err := w.separator(']'); end || err != nil {
			return err
		}
	}
}

// separator reads the ',' between members or elements, or the closer that
// ends the object or array (end is then true).
func (w *walker) separator(closer byte) (end bool, err error) {
	w.skipSpace()
	if w.i >= len(w.b) {
		return false, w.syntax("unexpected end")
	}
	switch w.b[w.i] {
	case ',':
		w.i++
		return false, nil
	case closer:
		w.i++
		return true, nil
	}
	return false, w.syntax("expected ',' or '" + string(closer) + "'")
}

// stringEnd moves past the string at w.i (its opening quote) and returns
// the offset just after its closing quote.
func (w *walker) stringEnd() (int, error) {
	for j := w.i + 1; j < len(w.b); j++ {
		switch w.b[j] {
		case '\\':
			j++
		case '"':
			w.i = j + 1
			return w.i, nil
		}
	}
	return 0, w.syntax("unterminated string")
}

// decodeString decodes one JSON string literal (quotes included). Invalid
// UTF-8 becomes U+FFFD, as encoding/json decodes it, so that removing a
// character between two stray bytes can never join them into a new one.
func decodeString(lit []byte) (string, error) {
	s, err := rawjson.Unquote(lit)
	if err != nil {
		return "", fmt.Errorf("invalid JSON string: %v", err)
	}
	return s, nil
}
