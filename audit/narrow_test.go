package audit

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

// fullRecord is a record with every member of a line set.
func fullRecord(target, errText string, args, id []byte) *record {
	r := &record{Entry: Entry{Time: time.Date(2026, 12, 7, 11, 40, 2, 123456789, time.UTC), Agent: "assistant",
		Session: "mcp-proxy-5f0c1d2e", Token: 3, Method: "tools/call", Target: target, Server: "github",
		Decision: DecisionDeny, Rule: "read_only", Approval: "deny", Outcome: "tool_error", Error: errText,
		Duration: 412345 * time.Microsecond, RequestID: id, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}}
	r.digest, r.args, r.hasDigest = digestOf(args, true)
	return r
}

// TestLineOwnParts: what a line holds besides the values appendLine
// marks for scrubbing is member names and values of lineFixed, the time,
// numbers and hex digits, whichever optional members the line has.
func TestLineOwnParts(t *testing.T) {
	oauth := fullRecord("gh__x", "boom", []byte(`{"a":1}`), []byte(`"r-1"`))
	oauth.Subject, oauth.Token = "user@example.com", 0
	big := fullRecord("gh__x", "", nil, []byte(`-1.5e3`))
	big.argsOmitted, big.Decision = omittedTooLarge, DecisionAllow
	bad := fullRecord("gh__x", "", nil, nil)
	bad.argsOmitted, bad.TraceID, bad.Decision = omittedInvalid, "not-a-trace-id", "maybe"
	tiny := &record{Entry: Entry{Method: "tools/call", Duration: 3}}
	made := func(s, alphabet string) bool { return strings.Trim(s, alphabet) == "" }
	for _, tc := range []struct {
		name string
		r    *record
	}{
		{"static token, full arguments", fullRecord("gh__x", "boom", []byte(`{"a":[1,true,null]}`), []byte(`7`))},
		{"oauth", oauth},
		{"arguments too large", big},
		{"decision and trace id not the package's", bad},
		{"least", tiny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, vals, err := tc.r.appendLine(nil, []int{})
			if err != nil {
				t.Fatal(err)
			}
			var own strings.Builder // the line with null for each value to scrub
			last := 0
			for i := 0; i < len(vals); i += 2 {
				own.Write(b[last:vals[i]])
				own.WriteString("null")
				last = vals[i+1]
			}
			own.Write(b[last:])
			dec := json.NewDecoder(strings.NewReader(own.String()))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("%v: %s", err, own.String())
			}
			for k, v := range m {
				if !slices.Contains(lineFixed, k) {
					t.Errorf("member name %q is not in lineFixed", k)
				}
				switch v := v.(type) {
				case nil: // scrubbed
				case json.Number:
					if !made(string(v), numberBytes) {
						t.Errorf("%s: number %s", k, v)
					}
				case string:
					if !slices.Contains(lineFixed, v) && !made(v, timeBytes) && !made(v, hexBytes) {
						t.Errorf("%s: %q is not the line's own", k, v)
					}
				default:
					t.Errorf("%s: %v is not the line's own", k, v)
				}
			}
			if s := own.String(); sanitize.NewScrubber(nil).LogLine(s) != s {
				t.Errorf("the line's own parts are not left as they are: %s", s)
			}
		})
	}
}

// writtenLine is what a Log with secrets writes for r, and whether it
// scrubbed only the values.
func writtenLine(t testing.TB, secrets []string, r *record) (string, bool) {
	sink := &keepingSink{}
	l, err := newLog(sink, config.AuditArgumentsFull, Options{Logger: zerolog.Nop(), Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	l.write([]*record{r})
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.kept) != 1 {
		t.Fatalf("%d lines written, want 1", len(sink.kept))
	}
	return sink.kept[0], l.narrow
}

// wholeLine is r's line scrubbed whole, as the writer did before it
// scrubbed only the values.
func wholeLine(t testing.TB, secrets []string, r *record) string {
	b, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	return sanitize.NewScrubber(secrets).LogLine(string(b))
}

// TestNarrowFallsBack: a configured secret that could occur among the
// line's own bytes (a number, a member name) makes the writer scrub whole
// lines, and what it writes is what a whole line's scrub writes: here the
// secret replaced inside the time, a member name and a digest; other
// secrets let it scrub only the values.
func TestNarrowFallsBack(t *testing.T) {
	r := fullRecord("gh__x", "boom", []byte(`{"a":1}`), []byte(`7`))
	for _, tc := range []struct {
		secret string
		narrow bool
	}{
		{"mcpp_3kq9Zr7vLx2Nw8Tb5Yc1Hd6Fj0Gm4Ps", true},
		{"2026-12-07", false},
		{"session", false},
		{"0ba5c5", false},
		{"Session", true},
		{"s3cr3t-value", true},
	} {
		t.Run(tc.secret, func(t *testing.T) {
			got, narrow := writtenLine(t, []string{tc.secret}, r)
			if want := wholeLine(t, []string{tc.secret}, r); got != want {
				t.Errorf("written\n%s\nwant (the whole line scrubbed)\n%s", got, want)
			}
			if narrow != tc.narrow {
				t.Errorf("narrow = %v, want %v", narrow, tc.narrow)
			}
		})
	}
}

// FuzzNarrowScrub: whatever the values of a line and the configured
// secret, scrubbing only the values writes the bytes that scrubbing the
// whole line writes.
func FuzzNarrowScrub(f *testing.F) {
	f.Add("github__create_issue", "upstream error -32000: boom", "github", []byte(`{"a":1}`), []byte(`7`), "cfg-secret-value-1234")
	f.Add("Cookie: a=", "Authorization: Bearer abcdefgh", "s", []byte(`{"p":"Cookie: x=\"y"}`), []byte(`"Cookie: a=\"b"`), "Zr7vLx2Nw8")
	f.Add("file:///x?token=abc", "token=cfg-secret-value-1234 sk-abcdefghij", "ghp_abcdefgh", []byte(`{"password":[1,2],"key":{"a":"b"}}`), []byte(`-1e400`), "cfg-secret-value-1234")
	f.Add("\u2028\u202e", "\\u001b[31m", "digest response=\"x\"", []byte(`"Basic dXNlcjpwYXNz"`), []byte(`"x://y?z#w"`), "pa55w0rd")
	f.Add("a\"b\\c", "password: \"x\"\nCookie: y", "", []byte(`[{"accessToken":"t0k3n-value"}]`), []byte(`1`), "t0k3n-value")
	for _, own := range []string{"2026-12-07T11", "session", "4bf92f3577b3", "412.345", "deny\"", "s3cr3t-value"} {
		f.Add("gh__x", "boom", own, []byte(`{"a":"`+own+`"}`), []byte(`"`+own+`"`), own)
	}
	f.Fuzz(func(t *testing.T, target, errText, server string, args, id []byte, secret string) {
		r := fullRecord(target, errText, args, id)
		r.Server, r.Agent, r.Subject, r.Token = server, secret, target, 0
		secrets := []string{secret, "Bearer ghp_configuredtoken0123456789"}
		if !r.hasDigest {
			r.args = nil
		}
		if _, err := r.encode(); err != nil {
			return // the writer drops such an entry
		}
		got, _ := writtenLine(t, secrets, r)
		if want := wholeLine(t, secrets, r); got != want {
			t.Fatalf("scrubbing the values wrote\n%q\nscrubbing the whole line\n%q", got, want)
		}
	})
}

// TestLineKeepsMembers: an untrusted target or error text ending in a
// header's '=' or an unclosed escaped quote is redacted inside its own
// member; the line keeps request_id, trace_id and every other member.
func TestLineKeepsMembers(t *testing.T) {
	for _, tc := range []struct {
		name, target, errText, wantTarget, wantError string
	}{
		{"cookie ending in =", "Cookie: a=", "boom", "Cookie: [REDACTED]", "boom"},
		{"unclosed escaped quote", "gh__x", `Cookie: a="b`, "gh__x", "Cookie: [REDACTED]"},
		{"key= at the end", "gh__x", `token="`, "gh__x", `token="`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fullRecord(tc.target, tc.errText, []byte(`{"a":1}`), []byte(`"r-1"`))
			for _, narrow := range []bool{true, false} {
				secrets := []string{"s3cr3t-value"}
				if !narrow {
					secrets = append(secrets, "session") // a member name: the whole line is scrubbed
				}
				got, isNarrow := writtenLine(t, secrets, r)
				if isNarrow != narrow {
					t.Fatalf("narrow = %v, want %v", isNarrow, narrow)
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(got), &m); err != nil {
					t.Fatalf("%v: %s", err, got)
				}
				if m["target"] != tc.wantTarget || m["error"] != tc.wantError {
					t.Errorf("target %q, error %q; want %q, %q: %s", m["target"], m["error"], tc.wantTarget, tc.wantError, got)
				}
				if m["request_id"] != "r-1" || m["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || m["outcome"] != "tool_error" {
					t.Errorf("members lost: %s", got)
				}
			}
		})
	}
}
