package override

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// FuzzCutParameters removes parameters from arbitrary schemas: the result
// is always valid JSON, holds none of the removed names in its top-level
// properties or required, and every other top-level member keeps its bytes.
func FuzzCutParameters(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{}},"required":["a","b"]}`), "a")
	f.Add([]byte(` { "properties" : { "x\u0079" : 1 , "z":[ ] } , "required" : [ "xy" ] } `), "xy,z")
	f.Add([]byte(`{"properties":{"a":1,"a":2},"required":["a","a",7,null]}`), "a")
	f.Add([]byte(`{"required":[],"properties":"nope"}`), "q")
	f.Add([]byte(`{"$defs":{"a":{}},"allOf":[{"properties":{"a":{}}}]}`), "a,b")
	f.Fuzz(func(t *testing.T, schema []byte, list string) {
		names := strings.Split(list, ",")
		before, err := rawjson.Members(schema)
		if err != nil {
			if _, _, err := CutParameters(schema, names); err == nil {
				t.Fatalf("CutParameters(%q) took a non-object", schema)
			}
			return
		}
		in := bytes.Clone(schema)
		got, missing, err := CutParameters(schema, names)
		if err != nil {
			t.Fatalf("CutParameters(%q): %v", schema, err)
		}
		if !bytes.Equal(in, schema) {
			t.Fatal("input modified")
		}
		if !json.Valid(got) {
			t.Fatalf("CutParameters(%q, %q) = %q: invalid JSON", schema, names, got)
		}
		after, err := rawjson.Members(got)
		if err != nil {
			t.Fatal(err)
		}
		// Every top-level member but properties and required is untouched,
		// in order; required may be gone.
		var keep, kept []string
		for _, m := range before {
			if m.Key != "properties" && m.Key != "required" {
				keep = append(keep, string(schema[m.Start:m.ValueEnd]))
			}
		}
		for _, m := range after {
			if m.Key != "properties" && m.Key != "required" {
				kept = append(kept, string(got[m.Start:m.ValueEnd]))
			}
		}
		if !slices.Equal(keep, kept) {
			t.Fatalf("other members changed:\n%q\n%q", keep, kept)
		}
		props, ok, _ := rawjson.Get(got, "properties")
		if ok && len(props) > 0 && props[0] == '{' {
			pm, _ := rawjson.Members(props)
			for _, m := range pm {
				if slices.Contains(names, m.Key) {
					t.Fatalf("%q still has property %q", got, m.Key)
				}
			}
			// A name is missing exactly when the original properties did
			// not have it.
			orig, _, _ := rawjson.Get(schema, "properties")
			om, _ := rawjson.Members(orig)
			for _, n := range names {
				had := slices.ContainsFunc(om, func(m rawjson.Member) bool { return m.Key == n })
				if had == slices.Contains(missing, n) {
					t.Fatalf("name %q: in properties %v, reported missing %v", n, had, missing)
				}
			}
		}
		if req, ok, _ := rawjson.Get(got, "required"); ok {
			if els, err := rawjson.Elements(req); err == nil {
				if len(els) == 0 {
					if oreq, _, _ := rawjson.Get(schema, "required"); !bytes.Equal(oreq, req) {
						t.Fatalf("required emptied but kept: %q", got)
					}
				}
				for _, e := range els {
					var s string
					if v := req[e.Start:e.End]; v[0] == '"' && json.Unmarshal(v, &s) == nil && slices.Contains(names, s) {
						t.Fatalf("%q still requires %q", got, s)
					}
				}
			}
		}
	})
}
