package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParseMessage checks ParseMessage against encoding/json: whatever it
// accepts, encoding/json decodes, and the two agree on every envelope
// member; whatever encoding/json refuses as JSON, it refuses too.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"x"}`,
		`{"jsonrpc":"2.0","\u0069d":1,"method":"x"}`,
		` {"jsonrpc" : "2.0" , "id" : -0.5 , "method" : "\u0078"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMessage(b)
		var generic map[string]json.RawMessage
		stdErr := json.Unmarshal(b, &generic)
		if stdErr == nil && generic == nil {
			stdErr = errors.New("null is not an object") // encoding/json takes it for an empty map
		}
		if err != nil {
			if stdErr == nil && err != ErrDuplicateMember {
				t.Fatalf("ParseMessage refused what encoding/json reads: %v", err)
			}
			// The one id of an object that repeats another member.
			if err == ErrDuplicateMember && m.ID != nil && stdErr == nil && !bytes.Equal(m.ID, bytes.TrimSpace(generic["id"])) {
				t.Fatalf("id of a duplicate: ParseMessage %q, encoding/json %q", m.ID, generic["id"])
			}
			return
		}
		if stdErr != nil {
			t.Fatalf("ParseMessage accepted what encoding/json refuses: %v", stdErr)
		}
		// encoding/json matches member names case-insensitively into a
		// struct; JSON-RPC names are exact, so compare on the exact map.
		for k := range generic {
			if k != strings.ToLower(k) {
				return
			}
		}
		eq := func(name string, a, b json.RawMessage) {
			if !bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b)) && !(len(b) == 0 && string(a) == "null") {
				t.Fatalf("%s: ParseMessage %q, encoding/json %q", name, a, b)
			}
		}
		eq("params", m.Params, generic["params"])
		eq("result", m.Result, generic["result"])
		eq("error", m.Error, generic["error"])
		if m.ID != nil {
			eq("id", m.ID, generic["id"])
		}
		if m.Kind == KindRequest || m.Kind == KindNotification {
			var method string
			if json.Unmarshal(generic["method"], &method) != nil || method != m.Method {
				t.Fatalf("method: ParseMessage %q, encoding/json %s", m.Method, generic["method"])
			}
		}
	})
}
