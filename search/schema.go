package search

import (
	"encoding/json"
	"sort"
)

// Bounds on reading an input schema. Schemas come from upstream servers and
// can be large or hostile; these keep indexing one tool cheap.
const (
	// maxSchemaBytes: a larger schema is not read for parameters (its tool is
	// still indexed by name and description).
	maxSchemaBytes = 1 << 20
	// maxSchemaDepth is how deep properties are followed: the tool's own
	// parameters and the fields of object (or array-of-object) parameters.
	maxSchemaDepth = 2
	// maxParams bounds the parameters read from one schema, over all depths.
	maxParams = 128
	// maxEnumValues bounds the enum strings read per parameter.
	maxEnumValues = 16
)

// schemaNode is the part of a JSON Schema that parameter indexing reads.
// Nested schemas stay raw until they are needed, so a huge subtree below
// maxSchemaDepth is scanned once by the decoder but never decoded.
type schemaNode struct {
	Description string                     `json:"description"`
	Properties  map[string]json.RawMessage `json:"properties"`
	Items       json.RawMessage            `json:"items"`
	Enum        []json.RawMessage          `json:"enum"`
}

// walkParams calls name for every parameter name and desc for every
// parameter description (and string enum value) of the input schema raw, to
// maxSchemaDepth levels and at most maxParams parameters, in sorted order of
// names at each level. Invalid or oversized JSON yields nothing; it never
// fails.
func walkParams(raw json.RawMessage, name, desc func(string)) {
	if len(raw) == 0 || len(raw) > maxSchemaBytes {
		return
	}
	var root schemaNode
	if json.Unmarshal(raw, &root) != nil {
		return
	}
	budget := maxParams
	walkProps(root.Properties, 1, &budget, name, desc)
}

func walkProps(props map[string]json.RawMessage, depth int, budget *int, name, desc func(string)) {
	if len(props) == 0 || depth > maxSchemaDepth {
		return
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if *budget <= 0 {
			return
		}
		*budget--
		name(k)
		var n schemaNode
		if json.Unmarshal(props[k], &n) != nil {
			continue
		}
		if n.Description != "" {
			desc(n.Description)
		}
		for i, e := range n.Enum {
			if i >= maxEnumValues {
				break
			}
			var s string
			if json.Unmarshal(e, &s) == nil {
				desc(s)
			}
		}
		walkProps(n.Properties, depth+1, budget, name, desc)
		if len(n.Items) > 0 {
			var item schemaNode
			if json.Unmarshal(n.Items, &item) == nil {
				walkProps(item.Properties, depth+1, budget, name, desc)
			}
		}
	}
}
