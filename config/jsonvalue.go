package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// maxJSONDepth bounds the nesting of a free-form value (tool override
// annotations and pinned arguments): far more than any real value needs,
// and a hostile document cannot recurse without end.
const maxJSONDepth = 64

// JSONValue encodes a free-form config value (what the YAML decoder gives
// for an `any` field: nil, bool, string, the number types, lists and
// mappings) as compact JSON with object keys sorted and no HTML escaping.
// It refuses what JSON cannot hold: mapping keys that are not strings,
// NaN and infinities, YAML timestamps (quote them), and values nested
// deeper than maxJSONDepth. Its errors never quote the value.
func JSONValue(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, v any, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("nested more than " + strconv.Itoa(maxJSONDepth) + " levels deep")
	}
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		buf.Write(rawjson.String(x))
	case int:
		buf.WriteString(strconv.Itoa(x))
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		buf.WriteString(strconv.FormatUint(x, 10))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return errors.New("JSON has no NaN or infinite numbers")
		}
		b, _ := json.Marshal(x) // finite: never fails
		buf.Write(b)
	case time.Time:
		return errors.New("a YAML timestamp is not a JSON value: quote it to pass it as a string")
	case []any:
		buf.WriteByte('[')
		for i, item := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, item, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		buf.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(rawjson.String(k))
			buf.WriteByte(':')
			if err := writeJSON(buf, x[k], depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, item := range x {
			ks, ok := k.(string)
			if !ok {
				return errors.New("mapping keys must be strings (quote them)")
			}
			m[ks] = item
		}
		return writeJSON(buf, m, depth)
	default:
		return errors.New("not a JSON value")
	}
	return nil
}
