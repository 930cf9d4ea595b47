package override

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// Tool is one compiled override: the config's values as the JSON they put
// on the wire. It is immutable and safe for concurrent use. A nil *Tool is
// not valid; callers keep nil for "no override".
type Tool struct {
	name        string
	title       json.RawMessage // a JSON string; nil keeps the upstream's
	description json.RawMessage
	annotations []member // sorted by key; a null value removes the key
	pins        []member // sorted by key
	pinned      []string // the pins' keys
	pinsJSON    []byte   // `"k":v,"k2":v2`, what Arguments inserts
}

// member is one key and its JSON value.
type member struct {
	key   string
	value json.RawMessage
}

// Compile turns a validated config override into a Tool. It fails only on
// values config validation refuses (JSONValue errors).
func Compile(o *config.ToolOverride) (*Tool, error) {
	t := &Tool{name: o.Name}
	if o.Title != "" {
		t.title = rawjson.String(o.Title)
	}
	if o.Description != "" {
		t.description = rawjson.String(o.Description)
	}
	var err error
	if t.annotations, err = members("annotations", o.Annotations); err != nil {
		return nil, err
	}
	if t.pins, err = members("arguments", o.Arguments); err != nil {
		return nil, err
	}
	for i, p := range t.pins {
		if i > 0 {
			t.pinsJSON = append(t.pinsJSON, ',')
		}
		t.pinsJSON = append(append(append(t.pinsJSON, rawjson.String(p.key)...), ':'), p.value...)
		t.pinned = append(t.pinned, p.key)
	}
	return t, nil
}

// members encodes a free-form map as members sorted by key.
func members(field string, m map[string]any) ([]member, error) {
	out := make([]member, 0, len(m))
	for k, v := range m {
		raw, err := config.JSONValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", field, k, err)
		}
		out = append(out, member{key: k, value: raw})
	}
	slices.SortFunc(out, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	return out, nil
}

// Name is the exposed name the override gives the tool; "" keeps the
// default one.
func (t *Tool) Name() string { return t.name }

// Pinned lists the pinned parameters, sorted; nil when there are none.
func (t *Tool) Pinned() []string { return t.pinned }

// Applied is what clients see of one upstream tool once its override is
// applied.
type Applied struct {
	// Raw is the tool object with title, description, annotations and
	// inputSchema rewritten as the override says; every other byte is the
	// upstream's. The input is never modified (Raw is the input itself
	// when the override changes nothing in it).
	Raw json.RawMessage
	// ReadOnly is annotations.readOnlyHint after the merge.
	ReadOnly bool
	// Missing are pinned parameters the tool's inputSchema does not
	// declare in its top-level properties (they are injected all the
	// same: the upstream may accept them).
	Missing []string
}

// Apply rewrites an upstream tool object (any bytes; an error for what is
// not a JSON object). The name is left alone: the catalog sets the exposed
// name.
func (t *Tool) Apply(raw json.RawMessage) (Applied, error) {
	out := []byte(raw)
	var err error
	if t.title != nil {
		if out, err = rawjson.Set(out, "title", t.title); err != nil {
			return Applied{}, err
		}
	}
	if t.description != nil {
		if out, err = rawjson.Set(out, "description", t.description); err != nil {
			return Applied{}, err
		}
	}
	if out, err = t.mergeAnnotations(out); err != nil {
		return Applied{}, err
	}
	var missing []string
	if len(t.pins) > 0 {
		if out, missing, err = t.pinSchema(out); err != nil {
			return Applied{}, err
		}
	}
	return Applied{Raw: out, ReadOnly: readOnly(out), Missing: missing}, nil
}

// mergeAnnotations sets the override's annotations over the tool's own
// (an annotations member that is missing or not an object counts as
// empty); a title override also replaces annotations.title when the
// upstream set one, for hosts that read the title there.
func (t *Tool) mergeAnnotations(tool []byte) ([]byte, error) {
	ann, ok, err := rawjson.Get(tool, "annotations")
	if err != nil {
		return nil, err
	}
	hasObject := ok && len(ann) > 0 && ann[0] == '{'
	retitle := false
	if t.title != nil && hasObject {
		_, retitle, _ = rawjson.Get(ann, "title")
	}
	if len(t.annotations) == 0 && !retitle {
		return tool, nil
	}
	merged := []byte(`{}`)
	if hasObject {
		merged = ann
	}
	if retitle {
		if merged, err = rawjson.Set(merged, "title", t.title); err != nil {
			return nil, err
		}
	}
	for _, a := range t.annotations {
		if string(a.value) == "null" {
			merged, err = rawjson.Delete(merged, a.key)
		} else {
			merged, err = rawjson.Set(merged, a.key, a.value)
		}
		if err != nil {
			return nil, err
		}
	}
	return rawjson.Set(tool, "annotations", merged)
}

// readOnly reports whether a tool object's annotations.readOnlyHint is
// true, given once (rawjson.Flag, as the upstream package reads it).
func readOnly(tool []byte) bool {
	v, err := rawjson.Pick(tool, "annotations")
	return err == nil && rawjson.Flag(v[0], "readOnlyHint")
}

// pinSchema removes the pinned parameters from the tool's inputSchema. A
// tool without an object inputSchema is left as it is, every pin missing.
func (t *Tool) pinSchema(tool []byte) ([]byte, []string, error) {
	schema, ok, err := rawjson.Get(tool, "inputSchema")
	if err != nil {
		return nil, nil, err
	}
	if !ok || len(schema) == 0 || schema[0] != '{' {
		return tool, t.pinned, nil
	}
	cut, missing, err := CutParameters(schema, t.pinned)
	if err != nil {
		return nil, nil, err
	}
	if bytes.Equal(cut, schema) {
		return tool, missing, nil
	}
	out, err := rawjson.Set(tool, "inputSchema", cut)
	return out, missing, err
}
