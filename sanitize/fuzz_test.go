package sanitize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

// quotedAfterKey is what follows a secret key in the quoted forms, up to
// the value (submatch 1).
const quotedAfterKey = `(?:"|'|\\")?[ \t]*:[ \t]*(?:"|'|\\")` +
	`(?:(?:bearer|basic|digest|negotiate|ntlm|dpop|aws4-hmac-sha256|hoba|mutual|scram-sha-1|scram-sha-256|vapid|privatetoken)[ \t]+)?([^"'\\\n]*)`

// These expressions restate the patterns independently of the scanner, to
// check its output.
var (
	leakedToken = regexp.MustCompile(`(?:^|[^A-Za-z0-9])(?:sk-|xoxb-|xoxp-|ghp_|gho_|ghu_|github_pat_|AIza)[A-Za-z0-9_-]{6,}`)
	bearerValue = regexp.MustCompile("(?i)(?:^|[^A-Za-z0-9])bearer[ \t]+([^ \t\n\r\"'\\\\,;&)\\]}<>`]+)")
	keyValueEq  = regexp.MustCompile("(?i)(?:^|[^A-Za-z0-9])(?:token|key|apikey|api_key|password|passwd|secret)[ \t]*=[ \t]*([^ \t\n\r\"'\\\\,;&)\\]}<>`]+)")
	keyValueQ   = regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9])(?:token|key|apikey|api_key|password|passwd|passphrase|secret|authorization|cookie|credentials?)` + quotedAfterKey)
	// camelKeyQ is keyValueQ for a key that starts at a camelCase boundary.
	camelKeyQ = regexp.MustCompile(`[a-z0-9](?:T(?i:oken)|K(?i:ey)|A(?i:pikey|pi_key|uthorization)|P(?i:assword|asswd|assphrase)|S(?i:ecret)|C(?i:ookie|redentials?))` +
		`(?i:` + quotedAfterKey + `)`)
	urlLike = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\x00-\\x20\"'\\\\<>`{}|^\\x7f]*")
)

func FuzzText(f *testing.F) {
	for _, s := range []string{
		"", "plain", "token=abc", `{"token":"abc"}`, `\"secret\":\"x\"`, "Bearer abc",
		"https://u:p@h/p?q=1#f", "sk-abcdefghij", "\x1b[31mx", "\U000E0041", "a\xffb",
		"(https://h/(a?b))x?y", "token=[REDACTED]x", "key='a\"b'", "https://a(b@h/x)y?q",
		"github_pat_0123456789", "AIza0123456789", "x://h?a=1 token : \"v\"",
		`{"authorization":"Basic dXNlcjpwYXNz"}`, "Cookie: a=1; b=2", `{"password":[1,{"a":"]"}]}`,
		`"h":"Digest username=\"M\", response=\"66\""`, "AWS4-HMAC-SHA256 Credential=A/1, Signature=f",
		`\nSet-Cookie: sid=1\n`, "Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag", `{"accessToken":"a","sessionCookie":["x"]}`,
		`{"n":"Basic\tdXNlcjpwYXNz"}`, "Bearer\\u0020abc", "Digest response=6629, x=1 and prose", `"Digest response=","b":"c"`,
		"Negotiate authentication-required by the server", "authorization\":1Cookie: a=1Cookie: [REDACTED]\x1b[",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Text(in)
		if again := Text(out); again != out {
			t.Fatalf("not idempotent:\n in    %q\n out   %q\n again %q", in, out, again)
		}
		checkClean(t, in, out)
		if e := Error(in); utf8.RuneCountInString(e) > MaxErrorRunes || !utf8.ValidString(e) {
			t.Fatalf("Error(%q) = %q: too long or invalid", in, e)
		}
		if s := StripTags(in); strings.ContainsFunc(s, isTag) {
			t.Fatalf("StripTags(%q) = %q keeps a TAG character", in, s)
		}
		if s := TerminalLine(in); !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool {
			return r < 0x20 || r == 0x7F || isC1(r) || isBidiControl(r) || r == '\u2028' || r == '\u2029'
		}) {
			t.Fatalf("TerminalLine(%q) = %q keeps a control character", in, s)
		}
	})
}

// checkClean asserts that out carries none of the things Text removes.
func checkClean(t *testing.T, in, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("Text(%q) = %q: invalid UTF-8", in, out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7F || isC1(r) || isTag(r) {
			t.Fatalf("Text(%q) = %q keeps control %U", in, out, r)
		}
	}
	if m := leakedToken.FindString(out); m != "" {
		t.Fatalf("Text(%q) = %q keeps token %q", in, out, m)
	}
	for _, re := range []*regexp.Regexp{bearerValue, keyValueEq} {
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			// The value class stops at ']', so a redacted value reads "[REDACTED".
			if m[1] != Redacted[:len(Redacted)-1] {
				t.Fatalf("Text(%q) = %q keeps value %q", in, out, m[0])
			}
		}
	}
	for _, m := range append(keyValueQ.FindAllStringSubmatch(out, -1), camelKeyQ.FindAllStringSubmatch(out, -1)...) {
		if m[1] != "" && !strings.HasPrefix(m[1], Redacted) {
			t.Fatalf("Text(%q) = %q keeps value %q", in, out, m[0])
		}
	}
	for _, u := range urlLike.FindAllString(out, -1) {
		// Up to the first ')' or ']' the URL is certainly one URL.
		if i := strings.IndexAny(u, ")]"); i >= 0 {
			u = u[:i]
		}
		if strings.ContainsAny(u, "?#") {
			t.Fatalf("Text(%q) = %q keeps a query in %q", in, out, u)
		}
	}
}

func FuzzScrubber(f *testing.F) {
	f.Add("s3cr3t-value", "other/secret&x", "env s3cr3t-value and https://h/p?x=other%2Fsecret%26x")
	f.Add("line\nbreak", `quo"te\`, `{"a":"line\nbreak"} quo"te\`)
	f.Add("8080443", "ACTED][REDACTED", "port 8080443 [REDACTED]")
	f.Add("abc def", "xyzxyz", "https://h/abc?q def")
	f.Add("rtl\u202esecret", "\u2066iso", "say \u202e rtl\u202esecret \u2028")
	f.Fuzz(func(t *testing.T, s1, s2, text string) {
		secrets := []string{s1, s2}
		sc := NewScrubber(secrets)

		out := sc.Text(text)
		checkNoSecret(t, "Text", out, secrets)
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q: invalid UTF-8", text, out)
		}

		var buf bytes.Buffer
		log := zerolog.New(sc.Writer(&buf))
		log.Info().Str("v", text).Str(s1, s2).Str("k", s1+text+s2).Msg(text)
		line := buf.String()
		if !json.Valid([]byte(line)) {
			t.Fatalf("log line is not valid JSON: %q", line)
		}
		if strings.ContainsFunc(line, isLogEscape) {
			t.Fatalf("log line keeps a bidi control: %q", line)
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatal(err)
		}
		for k, v := range fields {
			checkNoSecret(t, "log key", k, secrets)
			if s, ok := v.(string); ok {
				checkNoSecret(t, "log value", s, secrets)
				if strings.ContainsFunc(s, func(r rune) bool {
					return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7F || isC1(r) || isTag(r)
				}) {
					t.Fatalf("log value %q keeps a control character", s)
				}
			}
		}
	})
}

// checkNoSecret asserts that out holds no form of a secret the Scrubber
// knows (long enough, not marker text).
func checkNoSecret(t *testing.T, what, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			continue
		}
		for _, form := range []string{clean(s), url.QueryEscape(s), url.PathEscape(s), zerologEscape(s), marshalEscape(s)} {
			if len(form) >= MinSecretLen && !isMarkerPart(form) && strings.Contains(out, form) {
				t.Fatalf("%s %q holds secret %q as %q", what, out, s, form)
			}
		}
	}
}

// FuzzLogLineMembers: a JSON line of string members, their values holding
// a configured secret and header-like texts, stays valid JSON with the
// same member names in the same order once scrubbed, and holds no form of
// the secret. The line is written both as zerolog and as encoding/json
// escape strings.
func FuzzLogLineMembers(f *testing.F) {
	f.Add("s3cr3t-value", "a", "b", "c")
	f.Add("s3cr3t-value", "", `"b`, `b\`)
	f.Add("Zr7vLx2Nw8", `a="b`, `x\"y`, "\n")
	f.Add("pa55w0rd-1", "Digest response=", `token: "`, "Bearer ")
	f.Add("line\nbreak", "=\\\"", `\`, "https://u:p@h/?q")
	f.Fuzz(func(t *testing.T, secret, a, b, c string) {
		names := []string{"error", "tool", "authorization", "request_id", "trace_id", "message"}
		values := []string{
			"Cookie: " + a + "=",
			b + " token=" + `"` + c,
			"x " + secret + " " + a,
			"Authorization: Digest response=\"" + c,
			a + "\npassword: \"" + b,
			c,
		}
		sc := NewScrubber([]string{secret})

		var zl bytes.Buffer
		zlog := zerolog.New(&zl)
		ev := zlog.Log()
		for i, n := range names {
			ev = ev.Str(n, values[i])
		}
		ev.Send()
		var std bytes.Buffer
		std.WriteByte('{')
		for i, n := range names {
			if i > 0 {
				std.WriteByte(',')
			}
			k, _ := json.Marshal(n)
			v, _ := json.Marshal(values[i])
			std.Write(k)
			std.WriteByte(':')
			std.Write(v)
		}
		std.WriteString("}\n")

		for _, line := range []string{zl.String(), std.String()} {
			out := sc.LogLine(line)
			got, err := memberNames(out)
			if err != nil {
				t.Fatalf("LogLine(%q) = %q: %v", line, out, err)
			}
			if !slices.Equal(got, names) {
				t.Fatalf("LogLine(%q) = %q: members %q, want %q", line, out, got, names)
			}
			checkNoSecret(t, "log line", out, []string{secret})
			var m map[string]string
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatal(err)
			}
			for _, v := range m {
				checkNoSecret(t, "log value", v, []string{secret})
			}
		}
	})
}

// memberNames returns the names of the members of the JSON object s, in
// order, or an error when s is not one JSON object of string members.
func memberNames(s string) ([]string, error) {
	if !json.Valid([]byte(s)) {
		return nil, errors.New("not valid JSON")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("no object: %v %v", tok, err)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		names = append(names, tok.(string))
		if tok, err = dec.Token(); err != nil {
			return nil, err
		}
		if _, ok := tok.(string); !ok {
			return nil, fmt.Errorf("member %q is no string: %v", names[len(names)-1], tok)
		}
	}
	return names, nil
}
