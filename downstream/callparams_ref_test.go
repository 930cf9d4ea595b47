package downstream

import (
	"encoding/json"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// refReadCallParams is readCallParams as it was first written, over the
// slice of rawjson.Members: the reference the walking one is held to.
func refReadCallParams(params json.RawMessage) (callRequest, *wireError) {
	var c callRequest
	if len(params) == 0 || params[0] != '{' {
		return c, errorf(codeInvalidParams, "invalid params: tools/call needs a params object")
	}
	ms, err := rawjson.Members(params)
	if err != nil {
		return c, errorf(codeInvalidParams, "invalid params: %s", err.Error())
	}
	named := false
	for _, m := range ms {
		v := params[m.ValueStart:m.ValueEnd]
		switch m.Key {
		case "name":
			name, err := rawjson.Unquote(v)
			if err != nil {
				return c, errorf(codeInvalidParams, "invalid params: the tool name must be a string")
			}
			c.name = name
			named = true
		case "arguments":
			c.args = v
		case "_meta":
			if string(v) != "null" {
				c.meta = v
			}
		case "requestState":
			c.state = v
		case "task":
			if string(v) != "null" {
				c.task = v
			}
		}
	}
	if !named {
		return c, errorf(codeInvalidParams, "invalid params: tools/call needs a tool name")
	}
	if len(c.args) > 0 && c.args[0] != '{' && string(c.args) != "null" {
		return c, errorf(codeInvalidParams, "invalid params: arguments must be an object")
	}
	if len(c.meta) > 0 && c.meta[0] != '{' {
		return c, errorf(codeInvalidParams, "invalid params: _meta must be an object")
	}
	if len(c.task) > 0 && c.task[0] != '{' {
		return c, errorf(codeInvalidParams, "invalid params: task must be an object")
	}
	return c, nil
}

// FuzzReadCallParamsReference: readCallParams returns what
// refReadCallParams does, error or not, member for member.
func FuzzReadCallParamsReference(f *testing.F) {
	for _, s := range []string{
		`{"name":"a__b","arguments":{"x":[1,2]},"_meta":{"progressToken":"t"}}`,
		`{"name":1,"arguments":{}}`, `{"name":1,"arguments":}`, `{"name":1,"name":"a"}`, `{"name":"a","name":1}`,
		`{"name":"a","task":{"ttl":1},"requestState":"s"}`, `{"name":"a","task":null,"_meta":null}`, `{"name":"a"} x`,
		`{"arguments":[]}`, `{"name":"a","arguments":[]}`, `{"name":"a","_meta":1}`, `{"name":"a","task":1}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		c, werr := readCallParams(params)
		rc, rerr := refReadCallParams(params)
		if (werr == nil) != (rerr == nil) || werr != nil && (werr.Code != rerr.Code || werr.Message != rerr.Message) {
			t.Fatalf("readCallParams(%q) error %+v, want %+v", params, werr, rerr)
		}
		if c.name != rc.name || string(c.args) != string(rc.args) || string(c.meta) != string(rc.meta) ||
			string(c.state) != string(rc.state) || string(c.task) != string(rc.task) {
			t.Fatalf("readCallParams(%q) = %+v, want %+v", params, c, rc)
		}
	})
}
