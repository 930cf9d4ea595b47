package rawjson

import (
	"bytes"
	"encoding/json"
)

// String encodes s as a JSON string without HTML escaping, the way most MCP
// servers write strings (encoding/json would turn '<' into \u003c).
func String(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a Go string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}
