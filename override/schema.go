package override

import (
	"encoding/json"
	"slices"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// CutParameters removes the named parameters from a JSON Schema object
// (a tool's inputSchema): their members of the top-level "properties" and
// their strings in the top-level "required", which is removed whole when
// nothing is left in it. Every other byte stays as it was, and schema is
// never modified. missing are the names "properties" does not hold, in the
// order given. Nested schemas ($defs, allOf, …) are not looked into: a
// tool's parameters are its top-level properties. An error means schema
// is not a JSON object; a "properties" or "required" of another type is
// left alone.
func CutParameters(schema json.RawMessage, names []string) (json.RawMessage, []string, error) {
	ms, err := rawjson.Members(schema)
	if err != nil {
		return nil, nil, err
	}
	found := make(map[string]bool, len(names))
	out := []byte(schema)
	for _, m := range ms {
		if m.Key != "properties" {
			continue
		}
		props := schema[m.ValueStart:m.ValueEnd]
		if cut, ok := cutMembers(props, names, found); ok {
			if out, err = rawjson.Set(out, "properties", cut); err != nil {
				return nil, nil, err
			}
		}
		break // the first, as rawjson.Set replaces the first
	}
	if out, err = cutRequired(out, names); err != nil {
		return nil, nil, err
	}
	var missing []string
	for _, n := range names {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	return out, missing, nil
}

// cutMembers removes the members of obj named in names, marking them in
// found; ok is false when obj is not an object or nothing was removed.
func cutMembers(obj []byte, names []string, found map[string]bool) ([]byte, bool) {
	cut := false
	out, err := rawjson.DeleteFunc(obj, func(k string) bool {
		if !slices.Contains(names, k) {
			return false
		}
		found[k], cut = true, true
		return true
	})
	return out, err == nil && cut
}

// cutRequired removes the named strings from the schema's first "required"
// array, and the member itself when it ends up empty.
func cutRequired(schema []byte, names []string) ([]byte, error) {
	ms, err := rawjson.Members(schema)
	if err != nil {
		return nil, err
	}
	at := slices.IndexFunc(ms, func(m rawjson.Member) bool { return m.Key == "required" })
	if at < 0 {
		return schema, nil
	}
	req := schema[ms[at].ValueStart:ms[at].ValueEnd]
	els, err := rawjson.Elements(req)
	if err != nil {
		return schema, nil // not an array: not ours to judge
	}
	var drop []int
	for i, e := range els {
		var s string
		if v := req[e.Start:e.End]; v[0] == '"' && json.Unmarshal(v, &s) == nil && slices.Contains(names, s) {
			drop = append(drop, i)
		}
	}
	switch {
	case len(drop) == 0:
		return schema, nil
	case len(drop) == len(els):
		// An empty required is invalid in older JSON Schema drafts: the
		// member goes (this one: a duplicate "required" is not ours).
		seen := 0
		return rawjson.DeleteFunc(schema, func(k string) bool {
			if k != "required" {
				return false
			}
			seen++
			return seen == 1
		})
	}
	return rawjson.Set(schema, "required", rawjson.Cut(req, els, drop))
}
