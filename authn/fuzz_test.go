package authn

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// FuzzBearerToken: any Authorization header yields a bounded token without
// surrounding spaces, or none; never a panic.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"", "Bearer abc", "bearer  abc ", "Basic x", "Bearer", "Bearer ", "BEARER a.b.c", "Bearer\ta",
		"Bearer " + strings.Repeat("x", maxTokenBytes+1), "Bearer a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := bearerToken(h)
		if !ok {
			if tok != "" {
				t.Fatalf("not ok but token %q", tok)
			}
			return
		}
		if tok == "" || len(tok) > maxTokenBytes || strings.TrimSpace(tok) != tok {
			t.Fatalf("token %q from %q", tok, h)
		}
		if !strings.Contains(h, tok) || !strings.EqualFold(h[:6], "bearer") {
			t.Fatalf("token %q not from a Bearer header %q", tok, h)
		}
	})
}

// FuzzClaimMatching: claim values of any JSON shape (and non-JSON) never
// panic, and a rule matches only values the claim holds.
func FuzzClaimMatching(f *testing.F) {
	for _, s := range []string{`"eng"`, `["eng","ops"]`, `42`, `true`, `null`, `{"a":1}`, `[1,"x",[2]]`, `"`, `[`, ``, `  "eng" `, `1e400`} {
		f.Add(s, "eng")
	}
	f.Fuzz(func(t *testing.T, raw, want string) {
		rules := map[string]config.StringList{"c": {want}}
		got := matches(rules, map[string]json.RawMessage{"c": json.RawMessage(raw)})
		vals := claimValues(json.RawMessage(raw))
		held := false
		for _, v := range vals {
			held = held || v == want
		}
		if got != held {
			t.Fatalf("matches = %v, but values %q hold %q: %v", got, vals, want, held)
		}
		if matches(rules, map[string]json.RawMessage{}) {
			t.Fatal("a missing claim matched")
		}
		if matches(nil, map[string]json.RawMessage{"c": json.RawMessage(raw)}) {
			t.Fatal("no rules matched")
		}
		_ = tokenScopes(map[string]json.RawMessage{"scope": json.RawMessage(raw), "scp": json.RawMessage(raw)})
	})
}

// FuzzAccessToken: arbitrary bearer strings through the whole OAuth check
// (JWT parsing, header, claims) never panic and are never accepted.
func FuzzAccessToken(f *testing.F) {
	is := newTestIssuer(f, newRSAKey(f, "k1"))
	r := newRig(f, oauthDoc, is.srv.URL)
	for _, s := range []string{"a.b.c", "eyJhbGciOiJub25lIn0.e30.", "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.AAAA", "eyJ", "...", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		if p, fl := r.auth("", "Bearer "+tok); fl == nil {
			t.Fatalf("accepted %q as %+v", tok, p)
		}
	})
}

// TestClaimValues pins the comparison texts of claim values.
func TestClaimValues(t *testing.T) {
	tests := map[string]string{
		`"eng"`:            "eng",
		`["eng", 3, true]`: "eng|3|true",
		`3`:                "3",
		`4.2e1`:            "4.2e1",
		`{"a": [1, 2]}`:    `{"a":[1,2]}`,
		`null`:             "null",
		`[{"x": 1}]`:       `{"x":1}`,
		`not json`:         "",
	}
	for raw, want := range tests {
		if got := strings.Join(claimValues(json.RawMessage(raw)), "|"); got != want {
			t.Errorf("claimValues(%s) = %q, want %q", raw, got, want)
		}
	}
}
