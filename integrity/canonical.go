package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// fingerprintFields are the members of a tool object that its fingerprint
// covers (SPEC §13). Everything else (icons, _meta, unknown fields) may
// change without a rug pull being reported.
var fingerprintFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// fingerprintPrefix names the hash in every fingerprint string.
const fingerprintPrefix = "sha256:"

// Definition is the canonical JSON of the fingerprinted members of one tool
// object: the members of fingerprintFields that are present and not null,
// keys sorted (by their UTF-8 bytes) at every depth, no insignificant
// whitespace, numbers exactly as the upstream wrote them, strings encoded
// the way encoding/json does without HTML escaping (so "\u0041" and "A"
// are one string). Two tool objects that differ only in layout, key order
// or string escapes have the same Definition.
type Definition []byte

// Canonicalize returns the Definition of a raw tool object and its
// fingerprint, "sha256:" followed by 64 hex digits of the SHA-256 of the
// Definition. raw is not modified. A raw value that is not a JSON object is
// an error.
func Canonicalize(raw []byte) (Definition, string, error) {
	def, fp, _, err := canonicalize(raw)
	return def, fp, err
}

// canonicalize is Canonicalize that also returns the tool's name ("" when
// it is not a string).
func canonicalize(raw []byte) (Definition, string, string, error) {
	// One decoder over the whole object: numbers stay as written, and the
	// members are decoded once (the ones left out are small: icons, _meta).
	v, err := decodeNumbers(raw)
	obj, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, "", "", fmt.Errorf("%w: a tool definition must be a JSON object", ErrBadDefinition)
	}
	for k, v := range obj {
		if v == nil || !slices.Contains(fingerprintFields, k) {
			delete(obj, k)
		}
	}
	def, err := encodeCanonical(obj, len(raw))
	if err != nil {
		return nil, "", "", err
	}
	name, _ := obj["name"].(string)
	return def, fingerprintOf(def), name, nil
}

// canonicalJSON re-encodes any JSON value canonically (used for stored
// definitions, which are already canonical once written, and to check
// them).
func canonicalJSON(raw []byte) ([]byte, error) {
	v, err := decodeNumbers(raw)
	if err != nil {
		return nil, err
	}
	return encodeCanonical(v, len(raw))
}

// decodeNumbers decodes one JSON value keeping numbers as written.
func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the value")
	}
	return v, nil
}

// encodeCanonical writes v (maps, slices, strings, json.Number, bools,
// nil, as decodeNumbers makes them) with sorted keys, no whitespace and
// no HTML escaping: the bytes encoding/json writes for v with
// SetEscapeHTML(false), without its reflection and per-map sorting cost.
// Fingerprints already on disk depend on these bytes staying the same.
// size is the expected length (the source's is a good guess).
func encodeCanonical(v any, size int) ([]byte, error) {
	return appendCanonical(make([]byte, 0, size), v)
}

func appendCanonical(dst []byte, v any) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case json.Number: // as the decoder read it, so valid
		return append(dst, v...), nil
	case string:
		return appendString(dst, v), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendCanonical(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendString(dst, k), ':')
			if dst, err = appendCanonical(dst, v[k]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("%w: unexpected %T", ErrBadDefinition, v)
}

// appendString writes s as a JSON string the way encoding/json does
// without HTML escaping: quote and backslash escaped, \b \f \n \r \t
// for those controls and \u00XX for the others, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 as \u2028 and \u2029, every other character as is.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(dst, s[start:]...), '"')
}

// fingerprintOf hashes a Definition.
func fingerprintOf(def []byte) string {
	sum := sha256.Sum256(def)
	return fingerprintPrefix + hex.EncodeToString(sum[:])
}

// ShortFingerprint is the first 12 hex digits of a fingerprint, for log
// lines and terminal output.
func ShortFingerprint(fp string) string {
	if len(fp) > len(fingerprintPrefix)+12 {
		return fp[:len(fingerprintPrefix)+12]
	}
	return fp
}

// pretty indents a Definition for people (tools diff).
func pretty(def []byte) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, def, "", "  "); err != nil {
		return def
	}
	return buf.Bytes()
}
