package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
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
	def, err := encodeCanonical(obj)
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
	return encodeCanonical(v)
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
// nil) with sorted keys, no whitespace and no HTML escaping: encoding/json
// sorts map keys and writes json.Number as its text.
func encodeCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDefinition, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
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
