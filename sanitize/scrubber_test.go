package sanitize

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestScrubberText(t *testing.T) {
	sc := NewScrubber([]string{
		"hunter2-pass",          // env value
		"Basic dXNlcjpwYXNz",    // header value
		"tok/with space&=",      // needs URL encoding
		"line\nbreak\"quote",    // needs JSON escaping
		"hunter2-pass-and-more", // longer secret sharing a prefix
		"short",                 // below MinSecretLen: ignored
		"",                      // ignored
		"ACTED][REDA",           // marker text: ignored
	})
	tests := []struct {
		name, in, want string
	}{
		{"raw", "env FOO=hunter2-pass set", "env FOO=[REDACTED] set"},
		{"longest wins", "x hunter2-pass-and-more y", "x [REDACTED] y"},
		{"header value", "sent Authorization: Basic dXNlcjpwYXNz", "sent Authorization: [REDACTED]"},
		{"query-escaped", "body tok%2Fwith+space%26%3D end", "body [REDACTED] end"},
		{"path-escaped", "/p/tok%2Fwith%20space&= end", "/p/[REDACTED] end"},
		{"JSON-escaped", `{"v":"line\nbreak\"quote"}`, `{"v":"[REDACTED]"}`},
		{"raw with control removed", "line\nbreak\"quote", "[REDACTED]"},
		{"short value not replaced", "a short note", "a short note"},
		{"marker-like value not replaced", "[REDACTED][REDACTED]", "[REDACTED][REDACTED]"},
		{"then Text", "hunter2-pass at https://h/p?x=1", "[REDACTED] at https://h/p"},
		{"joined by a dropped query", "https://h/hunter2?q -pass", "https://h/hunter2 -pass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sc.Text(tt.in); got != tt.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScrubberJoinedByQueryDrop(t *testing.T) {
	sc := NewScrubber([]string{"abc def"})
	// Dropping "?q" joins "abc" and " def" into the secret; it must go too.
	if got, want := sc.Text("https://h/abc?q def"), "https://h/[REDACTED]"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestNilScrubber(t *testing.T) {
	var sc *Scrubber
	if got := sc.Text("token=abc"); got != "token=[REDACTED]" {
		t.Fatalf("nil Scrubber Text = %q", got)
	}
	var buf bytes.Buffer
	if _, err := sc.Writer(&buf).Write([]byte(`{"msg":"ok"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if buf.String() != `{"msg":"ok"}`+"\n" {
		t.Fatalf("nil Scrubber Writer wrote %q", buf.String())
	}
}

func TestScrubberWriterZerolog(t *testing.T) {
	secrets := []string{"s3cr3t-value", "8080443", `quo"te\back`, "tab\there"}
	sc := NewScrubber(secrets)
	var buf bytes.Buffer
	log := zerolog.New(sc.Writer(&buf))

	log.Info().
		Str("env", "s3cr3t-value").
		Int("port", 8080443).
		Str("odd", `quo"te\back`).
		Str("tabbed", "tab\there").
		Str("token", "not-in-config").
		Str("url", "https://h/p?sig=abc").
		Str(`s3cr3t-value`, "as a key").
		Msg("connected with s3cr3t-value\x1b[31m")

	out := buf.String()
	if !json.Valid([]byte(out)) {
		t.Fatalf("scrubbed line is not valid JSON: %s", out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"level":      "info",
		"env":        "[REDACTED]",
		"port":       "[REDACTED]",
		"odd":        "[REDACTED]",
		"tabbed":     "[REDACTED]",
		"token":      "[REDACTED]",
		"url":        "https://h/p",
		"[REDACTED]": "as a key",
		"message":    "connected with [REDACTED]",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("field %q = %#v, want %#v (line %s)", k, got[k], v, out)
		}
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("secret %q leaked: %s", s, out)
		}
	}
}

func TestScrubberWriterPlainText(t *testing.T) {
	sc := NewScrubber([]string{"s3cr3t-value"})
	var buf bytes.Buffer
	w := sc.Writer(&buf)
	in := "12:00 INF child said s3cr3t-value\r\n"
	n, err := w.Write([]byte(in))
	if err != nil || n != len(in) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
	}
	if got, want := buf.String(), "12:00 INF child said [REDACTED]\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

type failWriter struct{}

// TestScrubberWriterEscapesBidiControls: a log line, console or JSON,
// carries no bidirectional control nor line separator that could reorder
// a terminal line; the JSON line decodes to the text logged, and Text,
// which makes what MCP clients receive, keeps them as they are.
func TestScrubberWriterEscapesBidiControls(t *testing.T) {
	const msg = "child said: \u202eevil\u202c and \u2066isolate\u2069 \u200f\u061c\u2028end"
	sc := NewScrubber([]string{"hunter2-pass"})

	var console bytes.Buffer
	clog := zerolog.New(zerolog.ConsoleWriter{Out: sc.Writer(&console), NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}})
	clog.Info().Str("stream", "stderr").Msg(msg + " hunter2-pass")
	want := `INF child said: \u202eevil\u202c and \u2066isolate\u2069 \u200f\u061c\u2028end [REDACTED] stream=stderr` + "\n"
	if got := console.String(); got != want {
		t.Errorf("console line\n got %q\nwant %q", got, want)
	}

	var js bytes.Buffer
	jlog := zerolog.New(sc.Writer(&js))
	jlog.Info().Str("stream", "stderr").Msg(msg)
	line := js.String()
	if strings.ContainsFunc(line, isLogEscape) {
		t.Errorf("JSON line keeps a bidi control: %q", line)
	}
	var fields map[string]string
	if err := json.Unmarshal([]byte(line), &fields); err != nil || fields["message"] != msg {
		t.Errorf("JSON line %q decodes to %q (%v), want %q", line, fields["message"], err, msg)
	}

	if got := Text(msg); got != msg {
		t.Errorf("Text(%q) = %q; it must keep bidi controls", msg, got)
	}
}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestScrubberWriterError(t *testing.T) {
	n, err := NewScrubber(nil).Writer(failWriter{}).Write([]byte("x"))
	if err == nil || err.Error() != "disk full" || n != 0 {
		t.Fatalf("Write = %d, %v; want 0, disk full", n, err)
	}
}

func BenchmarkScrubberWriter(b *testing.B) {
	sc := NewScrubber([]string{"ghp_configuredtoken0123456789", "s3cr3t-value", "another-env-value"})
	line := []byte(`{"level":"info","server":"github","tool":"create_issue","duration_ms":412,"message":"tools/call finished"}` + "\n")
	w := sc.Writer(discard{})
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Write(line); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkScrubberAuditLine scrubs an audit line (docs/operations.md#audit-log)
// of a tool call with digested arguments, with the secrets of a config
// holding an agent token, an upstream header and two environment values.
func BenchmarkScrubberAuditLine(b *testing.B) {
	sc := NewScrubber([]string{"mcpp_3kq9Zr7vLx2Nw8Tb5Yc1Hd6Fj0Gm4Ps", "Bearer ghp_configuredtoken0123456789",
		"s3cr3t-value", "postgres://app:pa55w0rd@db.internal:5432/app"})
	line := []byte(`{"time":"2026-12-07T11:40:02.123456Z","agent":"assistant","session":"9b1f0c2e4a7d4e0f8c3b6a5d2e1f0a9b","client":"","method":"tools/call","target":"echo__echo","server":"echo","decision":"allow","outcome":"ok","duration_ms":0.412,"arguments_sha256":"5f2b8c0e9d4a7f1b3c6e2d8a0f5b9c4e7d1a3f6b8c2e5d9a0b4f7c1e3d6a8b2f","request_id":42}` + "\n")
	w := sc.Writer(discard{})
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Write(line); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLogValue: a value scrubbed alone is what LogLine makes of it inside
// a line of members that hold nothing to scrub, also when a redaction in
// it reaches the end of its string.
func TestLogValue(t *testing.T) {
	sc := NewScrubber([]string{"s3cr3t-value"})
	for _, tc := range []struct {
		name, value, want string
	}{
		{"plain", `"github__create_issue"`, `"github__create_issue"`},
		{"configured secret", `"upstream said s3cr3t-value"`, `"upstream said [REDACTED]"`},
		{"token shape", `"sk-abcdefghijkl"`, `"[REDACTED]"`},
		{"header line", `"Authorization: Bearer abcdef"`, `"Authorization: Bearer [REDACTED]"`},
		{"url", `"https://h/p?token=x#f"`, `"https://h/p"`},
		{"object", `{"password":[1,2],"accessToken":"t0k3n"}`, `{"password":"[REDACTED]","accessToken":"[REDACTED]"}`},
		{"number", `-1.5e3`, `-1.5e3`},
		{"cookie ending in =", `"Cookie: a="`, `"Cookie: [REDACTED]"`},
		{"escaped quote after =", `"Cookie: a=\"b"`, `"Cookie: [REDACTED]"`},
		{"key= at the end", `"token="`, `"token="`},
		{"in an object", `{"h":"Cookie: a="}`, `{"h":"Cookie: [REDACTED]"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sc.LogValue(tc.value)
			if got != tc.want {
				t.Fatalf("LogValue(%s) = %s, want %s", tc.value, got, tc.want)
			}
			line := `{"time":"2026-12-07T11:40:02.123456Z","v":` + tc.value + `,"n":1}` + "\n"
			want := sc.LogLine(line)
			if line := `{"time":"2026-12-07T11:40:02.123456Z","v":` + got + `,"n":1}` + "\n"; line != want {
				t.Errorf("LogValue(%s) = %s; in the line LogLine writes %s", tc.value, got, want)
			}
		})
	}
}

// TestInert: a secret is found among a line's own parts when one of its
// forms occurs in a fixed text or is made of an alphabet's bytes.
func TestInert(t *testing.T) {
	fixed := []string{"session", "duration_ms"}
	for _, tc := range []struct {
		secret string
		want   bool
	}{
		{"s3cr3t-value", true},
		{"session", false},
		{"ession", false},
		{"duration_m", false},
		{"123456", false},
		{"12345x", true},
		{"12 345", true}, // its URL-encoded form holds '+' and '%': the space keeps it out of every alphabet
	} {
		if got := NewScrubber([]string{tc.secret}).Inert(fixed, "0123456789"); got != tc.want {
			t.Errorf("Inert with secret %q = %v, want %v", tc.secret, got, tc.want)
		}
	}
	if !(*Scrubber)(nil).Inert(fixed, "0123456789") {
		t.Error("a nil Scrubber is not inert")
	}
}

// TestLogLineRedactionStaysInString: in a JSON line a redaction ends at the
// end of the JSON string it starts in at the latest, so no member is lost,
// and a value in escaped quotes inside a string is still hidden.
func TestLogLineRedactionStaysInString(t *testing.T) {
	sc := NewScrubber([]string{"s3cr3t-value"})
	const rest = `,"duration_ms":0.4,"request_id":"r-1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"cookie ending in =", `{"error":"Cookie: a="` + rest, `{"error":"Cookie: [REDACTED]"` + rest},
		{"cookie with an unclosed escaped quote", `{"error":"Cookie: a=\"b"` + rest, `{"error":"Cookie: [REDACTED]"` + rest},
		{"unclosed escaped quote, escaped backslash last", `{"error":"Cookie: a=\"b\\"` + rest, `{"error":"Cookie: [REDACTED]"` + rest},
		{"unclosed escaped quote, a later string quoted", `{"error":"Cookie: a=\"b","tool":"say \"hi\""` + rest,
			`{"error":"Cookie: [REDACTED]","tool":"say \"hi\""` + rest},
		{"proxy-authorization ending in =", `{"tool":"Proxy-Authorization: Digest a="` + rest, `{"tool":"Proxy-Authorization: Digest [REDACTED]"` + rest},
		{"key= at the end", `{"error":"token="` + rest, `{"error":"token="` + rest},
		{"key: at the end", `{"error":"api_key: "` + rest, `{"error":"api_key: "` + rest},
		{"escaped quoted key: at the end", `{"error":"x \"password\": "` + rest, `{"error":"x \"password\": "` + rest},
		{"camelCase key= at the end", `{"error":"accessToken= "` + rest, `{"error":"accessToken= "` + rest},
		{"digest response= at the end", `{"error":"Digest response="` + rest, `{"error":"Digest response="` + rest},
		// Still hidden, inside their strings.
		{"key=\\\"value\\\"", `{"error":"token=\"abc\" sent"` + rest, `{"error":"token=\"[REDACTED]\" sent"` + rest},
		{"key=\\\"value, unclosed", `{"error":"token=\"abc"` + rest, `{"error":"token=\"[REDACTED]"` + rest},
		{"cookie with quoted parameters", `{"error":"Cookie: a=\"b c\"; d=1"` + rest, `{"error":"Cookie: [REDACTED]"` + rest},
		{"digest credential", `{"error":"Authorization: Digest username=\"u\", response=\"6629fae4\""` + rest,
			`{"error":"Authorization: Digest [REDACTED]"` + rest},
		{"escaped member", `{"error":"body {\"password\": \"abc\"}"` + rest, `{"error":"body {\"password\": \"[REDACTED]\"}"` + rest},
		{"member named by a key", `{"token":"abc"` + rest, `{"token":"[REDACTED]"` + rest},
		{"member named by a key, number", `{"password":1234` + rest, `{"password":"[REDACTED]"` + rest},
		{"bearer", `{"error":"Bearer abcdef"` + rest, `{"error":"Bearer [REDACTED]"` + rest},
		{"url userinfo", `{"error":"https://u:p@h/x?q=1"` + rest, `{"error":"https://[REDACTED]@h/x"` + rest},
		{"configured secret", `{"error":"Cookie: a=s3cr3t-value"` + rest, `{"error":"Cookie: [REDACTED]"` + rest},
		// A key right after a \u escape of a byte that is no letter or digit
		// (encoding/json writes '&', '<', '>' so) starts a word.
		{"key after \\u0026", `{"error":"user=bob\u0026password=hunter22x"` + rest, `{"error":"user=bob\u0026password=[REDACTED]"` + rest},
		{"key after \\u003e", `{"error":"\u003etoken=abcdef\u003c"` + rest, `{"error":"\u003etoken=[REDACTED]\u003c"` + rest},
		{"bearer after \\u0026", `{"error":"x\u0026Bearer abcdef"` + rest, `{"error":"x\u0026Bearer [REDACTED]"` + rest},
		// A value in escaped quotes holding an escaped quote of its own
		// (text quoted twice: password="p\"w" in a JSON string) is hidden
		// whole, and so is a value of JSON nested twice in a string.
		{"escaped quoted value with an inner quote", `{"error":"password=\"p\\\"wd-tail\" sent"` + rest,
			`{"error":"password=\"[REDACTED]\" sent"` + rest},
		{"member of JSON nested twice", `{"error":"body {\"b\":\"{\\\"password\\\":\\\"hunter22x\\\"}\"}"` + rest,
			`{"error":"body {\"b\":\"{\\\"password\\\":\\\"[REDACTED]\\\"}\"}"` + rest},
		{"key= in JSON nested twice", `{"error":"{\"m\":\"token=\\\"abc def\\\" x\"}"` + rest,
			`{"error":"{\"m\":\"token=\\\"[REDACTED]\\\" x\"}"` + rest},
		{"escaped quoted value, an escaped backslash then the string's end", `{"error":"token=\"ab\\","id":"x"` + rest,
			`{"error":"token=\"[REDACTED]","id":"x"` + rest},
		// A number, array or object under a secret key in JSON quoted in a
		// string becomes an escaped-quoted marker.
		{"escaped member, number", `{"error":"body {\"pin\":{\"password\":4821}}"` + rest,
			`{"error":"body {\"pin\":{\"password\":\"[REDACTED]\"}}"` + rest},
		{"escaped member, array", `{"error":"{\"Set-Cookie\": [\"sid=1\", \"b]\\\"\"], \"n\":1}"` + rest,
			`{"error":"{\"Set-Cookie\": \"[REDACTED]\", \"n\":1}"` + rest},
		{"escaped member, object unclosed", `{"error":"{\"token\":{\"a\":1","id":"x"` + rest,
			`{"error":"{\"token\":{\"a\":1","id":"x"` + rest},
		{"key after an escaped letter", `{"error":"\u0061token=abcdef"` + rest, `{"error":"\u0061token=abcdef"` + rest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sc.LogLine(tc.in)
			if got != tc.want {
				t.Fatalf("LogLine(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("LogLine(%s) = %s: not valid JSON", tc.in, got)
			}
		})
	}
}

// TestPlainTextQuotedValues: outside a JSON line (also in text that only
// starts like one) a quote after a key opens the value, which is hidden
// whole.
func TestPlainTextQuotedValues(t *testing.T) {
	sc := NewScrubber([]string{"s3cr3t-value"})
	for _, tc := range []struct {
		in, want string
	}{
		{`token="abc def" sent`, `token="[REDACTED]" sent`},
		{`password: "abc def"`, `password: "[REDACTED]"`},
		{`Cookie: a="b c"; d=1`, `Cookie: [REDACTED]`},
		{`Authorization: Digest username="u", response="6629fae4"`, `Authorization: Digest [REDACTED]`},
		// Text that starts like a JSON object but is none.
		{`{x} token="abc def" sent`, `{x} token="[REDACTED]" sent`},
		{`{x} password: "abc def"`, `{x} password: "[REDACTED]"`},
		{"{x}\nCookie: a=\"b c\"; d=1", "{x}\nCookie: [REDACTED]"},
		{`{x}` + "\n" + `Cookie: a=\"b" c\"; d=1`, `{x}` + "\n" + `Cookie: [REDACTED]`},
	} {
		if got := sc.LogLine(tc.in); got != tc.want {
			t.Errorf("LogLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := sc.Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAPIKeyHeaderStructuredValue: a member named like the X-Api-Key
// header has a number, array or object value replaced whole, as its
// string value is (http.Header marshals each value as an array); a member
// named "key" or a camelCase *Key keeps such a value.
func TestAPIKeyHeaderStructuredValue(t *testing.T) {
	sc := NewScrubber(nil)
	for _, tc := range []struct {
		in, want string
	}{
		{`{"h":{"X-Api-Key":["k-445566"]},"n":1}`, `{"h":{"X-Api-Key":"[REDACTED]"},"n":1}`},
		{`{"h":{"api-key":{"v":"k-778899"}},"n":1}`, `{"h":{"api-key":"[REDACTED]"},"n":1}`},
		{`{"X-API-KEY":12345678}`, `{"X-API-KEY":"[REDACTED]"}`},
		{`{"X-Api-Key":"k-1"}`, `{"X-Api-Key":"[REDACTED]"}`},
		{`{"key":["a","b"],"sortKey":{"key":3}}`, `{"key":["a","b"],"sortKey":{"key":3}}`},
	} {
		if got := sc.LogLine(tc.in); got != tc.want {
			t.Errorf("LogLine(%s)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}
