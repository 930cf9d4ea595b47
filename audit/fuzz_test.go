package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// FuzzLine: whatever a client or upstream puts in the fields of an entry
// (targets, error texts, arguments, request ids), the written line is one
// line of valid JSON with the fixed members, and a configured secret never
// appears in it.
func FuzzLine(f *testing.F) {
	const secret = "cfg-secret-value-1234"
	f.Add("github__create_issue", "upstream error -32000: boom", []byte(`{"a":1}`), []byte(`7`), "full")
	f.Add("file:///x?token=abc\n\"}", "token="+secret, []byte(`{"p":"`+secret+`","password":"x"}`), []byte(`"id\u0000"`), "full")
	f.Add("\u2028\x1b[31mred", "", []byte(`[1, 2,`), []byte(`{}`), "digest")
	f.Add(strings.Repeat("é", 300), "\\u0000", []byte(` "s" `), []byte(`-1e400`), "none")
	sc := sanitize.NewScrubber([]string{secret})
	f.Fuzz(func(t *testing.T, target, errText string, args, id []byte, mode string) {
		l := &Log{mode: mode, sc: sc}
		r := &record{Entry: Entry{Time: time.Unix(0, 0), Agent: "a", Method: "tools/call", Target: target, Error: errText,
			Decision: DecisionAllow, RequestID: id}}
		if mode != "none" && len(args) > 0 {
			r.digest, r.args, r.hasDigest = digestOf(args, mode == "full" && len(args) <= MaxFullArguments)
		}
		b, err := r.encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var out bytes.Buffer
		_, _ = l.sc.Writer(&out).Write(b)
		line := out.Bytes()
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("not one line: %q", line)
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber() // request ids like 1e400 are valid JSON
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("not JSON: %v\n%q", err, line)
		}
		for _, k := range []string{"time", "agent", "client", "auth", "method", "target", "decision", "duration_ms"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("member %s missing: %s", k, line)
			}
		}
		if bytes.Contains(line, []byte(secret)) {
			t.Fatalf("secret written: %s", line)
		}
	})
}
