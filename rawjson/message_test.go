package rawjson

import (
	"strings"
	"testing"
)

func TestResponseID(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":`, "1"},
		{`{"id":"a","error":{`, `"a"`},
		{`{"id":1e3,"result":1}`, "1e3"},
		{`{"id":01,"result":1}`, ""},                // not a JSON number
		{`{"id":"a` + "\x01" + `","result":1}`, ""}, // raw control in a string
		{`{"id":12`, ""},                            // the number may go on
		{`{"id":true,"result":1}`, ""},
		{`{"id":{},"result":1}`, ""},
		{`{"result":1}`, ""},
		{`{"id":1}`, ""},
		{`{"id":1,"method":"x","result":1}`, ""},
		{`{"params":{"id":1},"result":2}`, ""},
		{`{"a":[{"id":3}],"id":4,"result":2}`, "4"},
		{`{"a":"\"id\":5","id":6,"result":`, "6"},
		{`{"id":1 "result":1}`, ""},
		{`  `, ""},
		{`"id"`, ""},
	}
	for _, tt := range tests {
		if got := string(ResponseID([]byte(tt.in))); got != tt.want {
			t.Errorf("ResponseID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseMessage(t *testing.T) {
	tests := []struct {
		name, in string
		kind     Kind
		id       string
		method   string
		invalid  bool
		err      bool
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`, KindRequest, "7", "tools/call", false, false},
		{"string id", `{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`, KindRequest, `"a\"b"`, "ping", false, false},
		{"big id kept as written", `{"id":18446744073709551615,"jsonrpc":"2.0","method":"ping"}`, KindRequest, "18446744073709551615", "ping", false, false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, "", "notifications/initialized", false, false},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, KindResponse, "1", "", false, false},
		{"error response", `{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}`, KindResponse, `"x"`, "", false, false},
		{"null id request", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, KindRequest, "null", "ping", false, false},
		{"no version", `{"id":1,"method":"ping"}`, KindInvalid, "1", "", true, false},
		{"bad version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, KindInvalid, "1", "", true, false},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, KindInvalid, "", "", true, false},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, KindInvalid, "", "", true, false},
		{"number method", `{"jsonrpc":"2.0","id":1,"method":3}`, KindInvalid, "1", "", true, false},
		{"scalar params", `{"jsonrpc":"2.0","id":1,"method":"x","params":3}`, KindInvalid, "1", "x", true, false},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":1,"error":{}}`, KindInvalid, "1", "", true, false},
		{"response without id", `{"jsonrpc":"2.0","result":1}`, KindInvalid, "", "", true, false},
		{"empty object", `{}`, KindInvalid, "", "", true, false},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, 0, "", "", false, true},
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`, 0, "", "", false, true},
		{"not JSON", `{"jsonrpc":`, 0, "", "", false, true},
		{"array", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, 0, "", "", false, true},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"x"} {}`, 0, "", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMessage([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if m.Kind != tt.kind || string(m.ID) != tt.id || (m.Invalid != "") != tt.invalid {
				t.Errorf("got kind %d id %q invalid %q, want kind %d id %q invalid %v", m.Kind, m.ID, m.Invalid, tt.kind, tt.id, tt.invalid)
			}
			// No test input has "id" or "method" but as a member name.
			if m.HasID != strings.Contains(tt.in, `"id"`) || m.HasMethod != strings.Contains(tt.in, `"method"`) {
				t.Errorf("HasID %v HasMethod %v", m.HasID, m.HasMethod)
			}
			if m.Kind != KindInvalid && m.Method != tt.method {
				t.Errorf("method = %q, want %q", m.Method, tt.method)
			}
		})
	}
}

// A message naming a member twice is refused with ErrDuplicateMember, and
// what its envelope still tells comes with it: whether it names an id and a
// method, and the id when it names exactly one valid one.
func TestParseMessageDuplicate(t *testing.T) {
	for _, tt := range []struct {
		in              string
		id              string
		hasID, hasMethd bool
	}{
		{`{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, "", true, true},
		{`{"jsonrpc":"2.0","id":"a","method":"a","method":"b"}`, `"a"`, true, true},
		{`{"jsonrpc":"2.0","id":{},"method":"a","method":"b"}`, "", true, true},
		{`{"jsonrpc":"2.0","method":"a","params":{},"params":[]}`, "", false, true},
		{`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`, "1", true, false},
	} {
		m, err := ParseMessage([]byte(tt.in))
		if err != ErrDuplicateMember {
			t.Errorf("%s: err = %v, want ErrDuplicateMember", tt.in, err)
			continue
		}
		if m.Kind != KindInvalid || m.Invalid == "" || string(m.ID) != tt.id || m.HasID != tt.hasID || m.HasMethod != tt.hasMethd || m.Method != "" || m.Params != nil || m.Result != nil {
			t.Errorf("%s: got %+v, want id %q, HasID %v, HasMethod %v and nothing else", tt.in, m, tt.id, tt.hasID, tt.hasMethd)
		}
	}
}

func TestObject(t *testing.T) {
	for in, ok := range map[string]bool{
		`{}`: true, ` {"a":[1,{"b":null}],"c":"\u00e9"} `: true, `{"a":1,"a":2}`: true,
		``: false, `[]`: false, `"x"`: false, `null`: false, `{"a":}`: false, `{"a":1} {}`: false, `{"a":01}`: false,
	} {
		if err := Object([]byte(in)); (err == nil) != ok {
			t.Errorf("Object(%s) = %v, want ok %v", in, err, ok)
		}
	}
}

func TestUnique(t *testing.T) {
	for in, dup := range map[string]bool{
		`{"a":1,"b":{"a":1,"a":2}}`: false,
		`{"a":1,"a":1}`:             true,
		`{"\u0061":1,"a":2}`:        true,
		`[1,1]`:                     false,
		`{}`:                        false,
	} {
		if err := Unique([]byte(in)); (err != nil) != dup {
			t.Errorf("Unique(%s) = %v, want duplicate %v", in, err, dup)
		}
	}
}

func TestIDKey(t *testing.T) {
	same := [][2]string{{`"a"`, `"\u0061"`}, {`1`, `1`}}
	differ := [][2]string{{`"1"`, `1`}, {`1`, `1.0`}, {`9007199254740993`, `9007199254740992`}}
	for _, p := range same {
		if IDKey([]byte(p[0])) != IDKey([]byte(p[1])) {
			t.Errorf("IDKey(%s) != IDKey(%s)", p[0], p[1])
		}
	}
	for _, p := range differ {
		if IDKey([]byte(p[0])) == IDKey([]byte(p[1])) {
			t.Errorf("IDKey(%s) == IDKey(%s)", p[0], p[1])
		}
	}
}

// BenchmarkParseMessage is the read of a tools/call response carrying
// 12 kB of text, which every upstream response of that size takes.
func BenchmarkParseMessage(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":"px-7","result":{"content":[{"type":"text","text":"` +
		strings.Repeat(`lorem ipsum, \"dolor\"\n`, 600) + `"}],"isError":false}}`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if m, err := ParseMessage(msg); err != nil || m.Kind != KindResponse {
			b.Fatal(m, err)
		}
	}
}
