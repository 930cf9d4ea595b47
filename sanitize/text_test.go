package sanitize

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text unchanged", "upstream \"github\": tools/call: boom", "upstream \"github\": tools/call: boom"},
		{"empty", "", ""},
		{"newline and tab kept", "a\n\tb", "a\n\tb"},
		{"C0 controls and DEL removed", "a\x00b\x07c\rd\x7fe", "abcde"},
		{"C1 control removed", "a\u0085b\u009bc", "abc"},
		{"ANSI colour removed whole", "\x1b[1;31merror\x1b[0m done", "error done"},
		{"lone ESC removed", "a\x1bb\x1b", "ab"},
		{"TAG characters removed", "ok\U000E0001\U000E0069\U000E007Fdone", "okdone"},
		{"invalid UTF-8 becomes one U+FFFD", "a\xff\xfeb", "a\uFFFDb"},
		{"URL query dropped", "GET https://api.example.com/v1/items?page=2&sig=abc failed", "GET https://api.example.com/v1/items failed"},
		{"URL fragment dropped", "see http://h/doc#secret-part.", "see http://h/doc"},
		{"URL without query unchanged", "see https://h/a/b.", "see https://h/a/b."},
		{"URL userinfo redacted", "dial https://bob:hunter2@h:8443/mcp?x=1", "dial https://[REDACTED]@h:8443/mcp"},
		{"URL in quotes", `url "https://h/p?k=v" bad`, `url "https://h/p" bad`},
		{"URL in parentheses", "(see https://h/p?q=1) next", "(see https://h/p) next"},
		{"URL with balanced parentheses in path", "https://h/w/A_(b)?q=1 x", "https://h/w/A_(b) x"},
		{"IPv6 host", "http://[::1]:9/x?y=1", "http://[::1]:9/x"},
		{"no scheme is no URL", "a ://h/p?q=1", "a ://h/p?q=1"},
		{"two URLs", "https://a/x?1 and wss://b/y?2", "https://a/x and wss://b/y"},
		{"sk- key", "key is sk-proj-abcDEF123_-xyz, done", "key is [REDACTED], done"},
		{"sk- too short stays", "use sk-learn here", "use sk-learn here"},
		{"sk- inside a word stays", "task-abcdefghij", "task-abcdefghij"},
		{"slack bot", "xoxb-123456-abcdef", "[REDACTED]"},
		{"slack user", "t=(xoxp-99999-88888)", "t=([REDACTED])"},
		{"github classic", "ghp_0123456789abcdefABCDEF0123456789abcd", "[REDACTED]"},
		{"github oauth", "tok:gho_abcdefgh", "tok:[REDACTED]"},
		{"github user", "ghu_abcdefgh.", "[REDACTED]."},
		{"github fine-grained", "github_pat_11AAAA_bbbbCCCC", "[REDACTED]"},
		{"google", "AIzaSyA-0123456789abcdef", "[REDACTED]"},
		{"prefix is case-sensitive", "SK-abcdefghij GHP_abcdefghij", "SK-abcdefghij GHP_abcdefghij"},
		{"bearer", "Authorization: Bearer eyJhbGciOi.payload.sig", "Authorization: Bearer [REDACTED]"},
		{"bearer any case", "authorization: BEARER abc123", "authorization: BEARER [REDACTED]"},
		{"bearer in JSON", `{"Authorization":"Bearer abc"}`, `{"Authorization":"Bearer [REDACTED]"}`},
		{"bearer without value", "a bearer\nb", "a bearer\nb"},
		{"token=", "retry with token=abc123&x=1", "retry with token=[REDACTED]&x=1"},
		{"TOKEN= any case", "TOKEN=abc", "TOKEN=[REDACTED]"},
		{"key=", "key=value;other", "key=[REDACTED];other"},
		{"api_key=", "api_key=abc", "api_key=[REDACTED]"},
		{"apikey=", "apikey = abc", "apikey = [REDACTED]"},
		{"password= quoted", `password="p a s s" user=x`, `password="[REDACTED]" user=x`},
		{"secret=", "client_secret=xyz", "client_secret=[REDACTED]"},
		{"access_token=", "access_token=xyz", "access_token=[REDACTED]"},
		{"x-api-key=", "x-api-key=xyz", "x-api-key=[REDACTED]"},
		{"key inside a word stays", "monkey=banana tokens=5 keyboard=us", "monkey=banana tokens=5 keyboard=us"},
		{"JSON form", `{"token":"abc","n":1}`, `{"token":"[REDACTED]","n":1}`},
		{"JSON form with spaces", `{"password" : "a\"b", "x": "y"}`, `{"password" : "[REDACTED]", "x": "y"}`},
		{"JSON form any case", `{"Api_Key":"abc"}`, `{"Api_Key":"[REDACTED]"}`},
		{"escaped JSON form", `body: {\"secret\":\"abc\"}`, `body: {\"secret\":\"[REDACTED]\"}`},
		{"YAML-ish quoted", `token: 'abc'`, `token: '[REDACTED]'`},
		{"unquoted colon form stays", "missing key: name", "missing key: name"},
		{"JSON number value stays", `{"key":12}`, `{"key":12}`},
		{"value already redacted", "token=[REDACTED] Bearer [REDACTED]", "token=[REDACTED] Bearer [REDACTED]"},
		{"secret in URL path", "https://h/keys/sk-abcdefghij?x", "https://h/keys/[REDACTED]"},
		{"blanks around =", "token = x y", "token = [REDACTED] y"},
		{"empty value", "token=&x=1 key=", "token=&x=1 key="},
		{"unterminated JSON value", `"token":"abc`, `"token":"[REDACTED]`},
		{"basic header line", "Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED]"},
		{"basic in prose", "sent Basic dXNlcjpwYXNz= to the server", "sent Basic [REDACTED] to the server"},
		{"basic word in prose stays", "Basic authentication failed; basic setup", "Basic authentication failed; basic setup"},
		{"authorization key, basic", `{"authorization":"Basic dXNlcjpwYXNz"}`, `{"authorization":"Basic [REDACTED]"}`},
		{"authorization key, any value", `{"Authorization":"Basic c2VjcmV0"}`, `{"Authorization":"Basic [REDACTED]"}`},
		{"authorization key, raw key", `{"AUTHORIZATION":"abc123"}`, `{"AUTHORIZATION":"[REDACTED]"}`},
		{"proxy-authorization key", `{"Proxy-Authorization":"Negotiate YIIabc"}`, `{"Proxy-Authorization":"Negotiate [REDACTED]"}`},
		{"nested header map", `{"req":{"headers":{"x":{"Authorization":"Digest a=1"}}}}`, `{"req":{"headers":{"x":{"Authorization":"Digest [REDACTED]"}}}}`},
		{"digest header line", `Authorization: Digest username="Mufasa", realm="x@h", response="6629fae4"` + "\nnext",
			"Authorization: Digest [REDACTED]\nnext"},
		{"digest in escaped JSON", `"h":"Digest username=\"Mufasa\", response=\"6629\"", "n":1`, `"h":"Digest [REDACTED]", "n":1`},
		{"aws sigv4", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=fe5f80f7",
			"AWS4-HMAC-SHA256 [REDACTED]"},
		{"negotiate", "WWW: Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag end", "WWW: Negotiate [REDACTED] end"},
		{"ntlm", "ntlm TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAGAbEdAAAADw==", "ntlm [REDACTED]"},
		{"negotiate word in prose stays", "Negotiate authentication with the host", "Negotiate authentication with the host"},
		{"dpop", "DPoP eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "DPoP [REDACTED]"},
		{"cookie key", `{"cookie":"sid=abc; theme=dark"}`, `{"cookie":"[REDACTED]"}`},
		{"set-cookie key", `{"Set-Cookie":"sid=abc; HttpOnly"}`, `{"Set-Cookie":"[REDACTED]"}`},
		{"cookie header line", "Cookie: sid=abc; theme=dark\nHost: h", "Cookie: [REDACTED]\nHost: h"},
		{"cookie header in escaped JSON", `"a":"GET /\nCookie: sid=abc\nHost: h"`, `"a":"GET /\nCookie: [REDACTED]\nHost: h"`},
		{"header word in prose stays", "server needs authorization: the token expired", "server needs authorization: the token expired"},
		{"x-api-key key", `{"X-API-Key":"k-123"}`, `{"X-API-Key":"[REDACTED]"}`},
		{"credentials key", `{"credentials":"u:p","credential":"c"}`, `{"credentials":"[REDACTED]","credential":"[REDACTED]"}`},
		{"passphrase key", `{"passphrase":"open sesame"}`, `{"passphrase":"[REDACTED]"}`},
		{"secret number value", `{"password":123456,"n":1}`, `{"password":"[REDACTED]","n":1}`},
		{"secret array value", `{"cookie":["a=1","b=]2"],"n":1}`, `{"cookie":"[REDACTED]","n":1}`},
		{"secret object value", `{"Credentials":{"user":"u","pass":"p}"},"n":1}`, `{"Credentials":"[REDACTED]","n":1}`},
		{"unclosed object value stays", `{"token":{"a":1`, `{"token":{"a":1`},
		{"authorization= with a scheme", "authorization=Basic c2VjcmV0 next", "authorization=Basic [REDACTED] next"},
		{"authorization= quoted", `Authorization="Digest a=1, b=2" x`, `Authorization="Digest [REDACTED]" x`},
		{"number glued to text stays", `"password":1Cookie: a=1`, `"password":1Cookie: a=1`},
		{"literal value stays", `{"token":null,"secret":true}`, `{"token":null,"secret":true}`},
		// camelCase keys: an upper case letter after a lower case one
		// or a digit starts a word of the key.
		{"camelCase accessToken", `{"accessToken":"eyJabc"}`, `{"accessToken":"[REDACTED]"}`},
		{"camelCase clientSecret", `{"clientSecret":"s3"}`, `{"clientSecret":"[REDACTED]"}`},
		{"camelCase refreshToken", `{"refreshToken":"r1"}`, `{"refreshToken":"[REDACTED]"}`},
		{"camelCase privateKey", `{"privateKey":"-----BEGIN"}`, `{"privateKey":"[REDACTED]"}`},
		{"camelCase apiKey", `{"apiKey":"abc"}`, `{"apiKey":"[REDACTED]"}`},
		{"camelCase sessionCookie", `{"sessionCookie":"sid=1"}`, `{"sessionCookie":"[REDACTED]"}`},
		{"camelCase after a digit", `{"oauth2Token":"t"}`, `{"oauth2Token":"[REDACTED]"}`},
		{"camelCase number value", `{"dbPassword":4821}`, `{"dbPassword":"[REDACTED]"}`},
		{"camelCase key=", "refreshToken=abc next", "refreshToken=[REDACTED] next"},
		{"camelCase escaped JSON", `{\"accessToken\":\"abc\"}`, `{\"accessToken\":\"[REDACTED]\"}`},
		{"upper snake PRIVATE_KEY", "PRIVATE_KEY=abc", "PRIVATE_KEY=[REDACTED]"},
		{"kebab private-key", `{"private-key":"abc"}`, `{"private-key":"[REDACTED]"}`},
		{"x_api_key", `{"x_api_key":"abc"}`, `{"x_api_key":"[REDACTED]"}`},
		{"camelCase Key keeps its structured values", `{"sortKey":12,"hotKey":["a"]}`, `{"sortKey":12,"hotKey":["a"]}`},
		{"words that are no secret key stay", `{"monkey":"m","keyboard":"us","tokenizer":"bpe","passwordless":"yes","tokens":"5","turkey":"t"}`,
			`{"monkey":"m","keyboard":"us","tokenizer":"bpe","passwordless":"yes","tokens":"5","turkey":"t"}`},
		{"camelCase near misses stay", `{"tokenCount":3,"keyName":"k","secretsManager":"aws","passwordPolicy":"strong"}`,
			`{"tokenCount":3,"keyName":"k","secretsManager":"aws","passwordPolicy":"strong"}`},
		{"all upper run is one word", `{"APITOKEN":"x","MONKEY":"y"}`, `{"APITOKEN":"x","MONKEY":"y"}`},
		{"camelCase starts no token prefix", "mySk-abcdefghij xAIzaSyA-0123456789", "mySk-abcdefghij xAIzaSyA-0123456789"},
		{"camelCase starts no scheme", "xBearer abc myBasic dXNlcjpwYXNz", "xBearer abc myBasic dXNlcjpwYXNz"},
		// Blanks written as JSON escapes.
		{"basic after an escaped tab", `{"note":"Basic\tdXNlcjpwYXNz"}`, `{"note":"Basic\t[REDACTED]"}`},
		{"bearer after an escaped tab", `{"note":"Bearer\tabc123"}`, `{"note":"Bearer\t[REDACTED]"}`},
		{"bearer after an escaped space", `{"note":"Bearer\u0020abc123"}`, `{"note":"Bearer\u0020[REDACTED]"}`},
		{"basic after an escaped \\u0009", `{"note":"Basic\u0009dXNlcjpwYXNz"}`, `{"note":"Basic\u0009[REDACTED]"}`},
		{"token after escaped tabs", `{"q":"token\t=\tabc"}`, `{"q":"token\t=\t[REDACTED]"}`},
		{"escaped newline is no blank", `{"note":"a Bearer\nnext line"}`, `{"note":"a Bearer\nnext line"}`},
		{"escaped backslash then t is no blank", `{"p":"Bearer\\tabc"}`, `{"p":"Bearer\\tabc"}`},
		// Parameter schemes need a credential parameter, and only the
		// parameter list is replaced.
		{"digest in prose stays", "Digest algorithm=SHA-256 is the default; see the docs", "Digest algorithm=SHA-256 is the default; see the docs"},
		{"digest challenge stays", `WWW-Authenticate: Digest realm="x@h", nonce="dcd98b", qop="auth"`, `WWW-Authenticate: Digest realm="x@h", nonce="dcd98b", qop="auth"`},
		{"digest credential, prose after it stays", `sent Digest username="M", nonce="dcd98b", response="6629fae4" to the host; see the docs`,
			"sent Digest [REDACTED] to the host; see the docs"},
		{"digest quoted-pair before the response", `Digest username="Mu\"fasa", response="6629fae4" ok`, "Digest [REDACTED] ok"},
		{"digest unquoted response", "Digest username=M, response=6629fae4 then", "Digest [REDACTED] then"},
		{"digest empty response stays", `Digest username="M", response=""`, `Digest username="M", response=""`},
		{"aws sigv4, prose after it stays", "AWS4-HMAC-SHA256 Credential=AKIA/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=fe5f80f7 was refused",
			"AWS4-HMAC-SHA256 [REDACTED] was refused"},
		{"aws sigv4 word in prose stays", "AWS4-HMAC-SHA256 signing=required by this bucket", "AWS4-HMAC-SHA256 signing=required by this bucket"},
		{"vapid", "vapid t=eyJ0eXAi.eyJhdWQi.c2ln, k=BA1Hxzyi rest", "vapid [REDACTED] rest"},
		{"scram", "SCRAM-SHA-256 data=biwsbj11c2VyLHI9 ok", "SCRAM-SHA-256 [REDACTED] ok"},
		{"digest at the end of a JSON string keeps JSON valid", `{"a":"Digest response=","b":"c"}`, `{"a":"Digest response=","b":"c"}`},
		{"digest escaped value stops at the JSON string's end", `{"a":"Digest response=\"x","b":"\"y"}`, `{"a":"Digest response=\"x","b":"\"y"}`},
		// Opaque schemes need a token68 that is not shaped like words.
		{"negotiate hyphenated words stay", "Negotiate authentication-required by the server", "Negotiate authentication-required by the server"},
		{"negotiate capitalized words stay", "NTLM Authentication-Required-Here ok", "NTLM Authentication-Required-Here ok"},
		{"negotiate upper case word stays", "Negotiate AUTHENTICATIONFAILED", "Negotiate AUTHENTICATIONFAILED"},
		{"negotiate base64 with padding", "Negotiate oYG2MIGzoAMKAQChCwYJKoZIhvcSAQICooGeBIGbYIGYBgkqhkiG9xIBAgICAG+B==", "Negotiate [REDACTED]"},
		{"negotiate lower case base64 with a digit", "Negotiate abcdefgh1jklmnopqrst x", "Negotiate [REDACTED] x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Text(tt.in)
			if got != tt.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := Text(got); again != got {
				t.Errorf("not idempotent: Text(%q) = %q", got, again)
			}
		})
	}
}

func TestTextReturnsInputWhenClean(t *testing.T) {
	in := `{"level":"info","server":"github","msg":"connected"}`
	if got := Text(in); got != in {
		t.Fatalf("Text changed a clean line: %q", got)
	}
	allocs := testing.AllocsPerRun(100, func() { _ = Text(in) })
	if allocs != 0 {
		t.Fatalf("Text of a clean line allocated %v times", allocs)
	}
}

func TestError(t *testing.T) {
	long := strings.Repeat("é", 600)
	tests := []struct {
		name, in, want string
	}{
		{"short unchanged", "boom", "boom"},
		{"exactly the limit", strings.Repeat("a", MaxErrorRunes), strings.Repeat("a", MaxErrorRunes)},
		{"cut on runes", long, strings.Repeat("é", MaxErrorRunes-1) + "…"},
		{"sanitized before the cut", "token=abc " + strings.Repeat("x", 600), "token=[REDACTED] " + strings.Repeat("x", MaxErrorRunes-len("token=[REDACTED] ")-1) + "…"},
		{"marker never split", strings.Repeat("x", 490) + " token=abcdef", strings.Repeat("x", 490) + " token=…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Error(tt.in)
			if got != tt.want {
				t.Errorf("Error(...)\n got %q\nwant %q", got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > MaxErrorRunes {
				t.Errorf("Error returned %d runes, more than %d", n, MaxErrorRunes)
			}
		})
	}
}

func TestStripTags(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"none", "plain é 😀", "plain é 😀"},
		{"all tags", "\U000E0000\U000E0041\U000E007F", ""},
		{"mixed", "Read\U000E0049\U000E0047 the file", "Read the file"},
		{"neighbours of the range stay", "\U000DFFFF\U000E0080", "\U000DFFFF\U000E0080"},
		{"other F3 A0 runes stay", "\U000E0100x", "\U000E0100x"},
		{"invalid UTF-8 untouched", "a\xf3\xa0b", "a\xf3\xa0b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StripTags(tt.in); got != tt.want {
				t.Errorf("StripTags(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

var sink string

func BenchmarkText(b *testing.B) {
	lines := map[string]string{
		"clean": `{"level":"info","server":"github","tool":"create_issue","duration_ms":412,"message":"tools/call finished"}`,
		"url":   `{"level":"warn","server":"remote","error":"Post \"https://mcp.example.com/mcp?session=abc\": dial tcp: connection refused"}`,
		"secret": `{"level":"error","server":"x","error":"401 from upstream: {\"error\":\"bad token\",\"token\":\"abc\"} ` +
			`Authorization: Bearer eyJhbGciOi sk-proj-0123456789abcdef"}`,
	}
	for name, line := range lines {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				sink = Text(line)
			}
		})
	}
}
