package oauthclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/internal/httpguard"
)

// FuzzParseChallenge: any WWW-Authenticate value parses without a panic,
// into bounded, clean scopes.
func FuzzParseChallenge(f *testing.F) {
	for _, s := range []string{
		`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="read write"`,
		`Bearer error="insufficient_scope", scope="a b", error_description="needs \"b\""`,
		`Basic realm="x", Bearer scope=files:read`,
		`Bearer`, `Bearer ,`, `"Bearer`, `Bearer scope="unterminated`, `Bearer a=b=c, ,`,
		`Bearer scope="` + strings.Repeat("s ", 100) + `"`,
	} {
		f.Add(s, "")
	}
	f.Add(`Bearer x=1`, `Bearer resource_metadata="https://a.example/prm"`)
	f.Fuzz(func(t *testing.T, a, b string) {
		ch := ParseChallenge([]string{a, b})
		if len(ch.Scopes) > maxScopes {
			t.Fatalf("%d scopes", len(ch.Scopes))
		}
		seen := map[string]bool{}
		for _, s := range ch.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\r\n") || len(s) > maxScopeLen || seen[s] {
				t.Fatalf("bad scope %q in %q", s, ch.Scopes)
			}
			seen[s] = true
		}
		if len(ch.Description) > 200+len("…") {
			t.Fatalf("description of %d bytes", len(ch.Description))
		}
	})
}

// FuzzCanonicalURL: the canonical form is stable and keeps no query,
// fragment or user info.
func FuzzCanonicalURL(f *testing.F) {
	for _, s := range []string{"https://MCP.example.com:443/mcp", "http://localhost:8080/", "https://u:p@h/x?q=1#f", "http://[::1]:80", "ftp://x", "https://", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := CanonicalURL(raw)
		if err != nil {
			return
		}
		again, err := CanonicalURL(c)
		if err != nil || again != c {
			t.Fatalf("CanonicalURL(%q) = %q, but CanonicalURL(%q) = %q, %v", raw, c, c, again, err)
		}
		u, err := url.Parse(c)
		if err != nil || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			t.Fatalf("canonical %q has a query, fragment or user info", c)
		}
		if !resourceCovers(c, c) {
			t.Fatalf("%q does not cover itself", c)
		}
	})
}

// FuzzSplitCommand: splitting never panics, and plain words survive.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{`xdg-open`, `'/opt/my browser/open' --new`, `"a \" b" c\ d`, `'unterminated`, `"x\`, `a\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitCommand(s)
		if err != nil {
			return
		}
		plain := strings.FieldsFunc(s, func(r rune) bool { return r < 0x80 && isBlank(byte(r)) })
		if !strings.ContainsAny(s, `'"\`) && strings.Join(words, "\x00") != strings.Join(plain, "\x00") {
			t.Fatalf("SplitCommand(%q) = %q", s, words)
		}
	})
}

// docTransport answers every request with a fixed document for the
// discovery URLs the fuzzer targets, 404 otherwise.
type docTransport struct{ prm, asm []byte }

func (d docTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	switch {
	case strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource"):
		body = d.prm
	case strings.Contains(r.URL.Path, "/.well-known/oauth-authorization-server"), strings.Contains(r.URL.Path, "openid-configuration"):
		body = d.asm
	}
	status := http.StatusOK
	if body == nil {
		status = http.StatusNotFound
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
}

// FuzzMetadataDocuments: any protected resource and authorization server
// metadata documents give an error or metadata whose endpoints are http(s)
// URLs, a resource that is the server's URL or covers it (and has no
// fragment), and never a panic.
func FuzzMetadataDocuments(f *testing.F) {
	f.Add([]byte(`{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example.com"],"scopes_supported":["a"]}`),
		[]byte(`{"issuer":"https://as.example.com","authorization_endpoint":"https://as.example.com/a","token_endpoint":"https://as.example.com/t","code_challenge_methods_supported":["S256"]}`))
	f.Add([]byte(`{"resource":"https://mcp.example.com","authorization_servers":["https://as.example.com/t1"]}`),
		[]byte(`{"issuer":"https://as.example.com/t1","authorization_endpoint":"javascript:alert(1)","token_endpoint":"http://as.example.com/t"}`))
	f.Add([]byte(`{"resource":"https://MCP.example.com/","authorization_servers":["https://as.example.com"]}`),
		[]byte(`{"issuer":"https://as.example.com","authorization_endpoint":"https://as.example.com/a","token_endpoint":"https://as.example.com/t","code_challenge_methods_supported":["S256"]}`))
	f.Add([]byte(`[]`), []byte(`{"issuer":1}`))
	f.Add([]byte(`{"resource":null,"authorization_servers":[""]}`), []byte(`not json`))
	f.Fuzz(func(t *testing.T, prm, asm []byte) {
		hc := &http.Client{Transport: docTransport{prm: prm, asm: asm}, Timeout: time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		const server = "https://mcp.example.com/mcp"
		md, err := discover(ctx, hc, server, Challenge{})
		if err != nil {
			if !utf8.ValidString(err.Error()) && utf8.Valid(prm) && utf8.Valid(asm) {
				t.Fatalf("error text is not UTF-8: %q", err)
			}
			return
		}
		if md.Resource != server && (!resourceCovers(md.Resource, server) || strings.Contains(md.Resource, "#")) {
			t.Fatalf("resource %q", md.Resource)
		}
		for _, e := range []string{md.TokenEndpoint, md.AuthorizationEndpoint} {
			if e == "" && md.Legacy == "" {
				continue
			}
			u, err := url.Parse(e)
			if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && httpguard.IsLoopback(u.Hostname()))) {
				t.Fatalf("endpoint %q accepted for an https server", e)
			}
		}
	})
}

// FuzzCallbackQuery: whatever query the browser brings back, a code is
// taken only with the login's state and, when the response names an
// issuer or the metadata promises one, exactly the metadata's issuer; the
// error texts are UTF-8 when the query is; never a panic.
func FuzzCallbackQuery(f *testing.F) {
	const issuer = "https://as.example.com"
	f.Add("code=c&state=s", false)
	f.Add("code=c&state=s&iss=https%3A%2F%2Fas.example.com", true)
	f.Add("code=c&state=s&iss=https%3A%2F%2Fas.example.com%2F", true)
	f.Add("error=access_denied&error_description=no&state=s&iss=x", false)
	f.Add("code=c&state=s&iss=&iss=", false)
	f.Add("state=s", true)
	f.Fuzz(func(t *testing.T, query string, required bool) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		req := &authRequest{state: "s", md: &Metadata{ResponseIssuer: issuer, ResponseIssRequired: required}}
		code, err := callbackCode(q, req)
		if err != nil {
			if code != "" {
				t.Fatalf("code %q with error %v", code, err)
			}
			if !utf8.ValidString(err.Error()) && utf8.ValidString(query) {
				t.Fatalf("error text is not UTF-8: %q", err)
			}
			return
		}
		iss, has := q["iss"]
		switch {
		case q.Get("state") != "s":
			t.Fatalf("code taken with state %q", q.Get("state"))
		case has && (len(iss) != 1 || iss[0] != issuer):
			t.Fatalf("code taken with iss %q", iss)
		case !has && required:
			t.Fatal("code taken without the promised iss")
		case code == "" || code != q.Get("code"):
			t.Fatalf("code %q from query %q", code, query)
		}
	})
}
