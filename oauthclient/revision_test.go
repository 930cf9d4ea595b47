package oauthclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestRegistrationApplicationType: Dynamic Client Registration declares
// application_type native for a loopback redirect URI (the login's own
// listener, a status page on loopback) and web for any other.
func TestRegistrationApplicationType(t *testing.T) {
	tests := []struct {
		name     string
		redirect string // "" means the loopback listener of Client.Login
		want     string
	}{
		{"login listener", "", "native"},
		{"status page on 127.0.0.1", "http://127.0.0.1:9464/auth/callback", "native"},
		{"status page on localhost", "http://localhost:9464/auth/callback", "native"},
		{"status page on ::1", "http://[::1]:9464/auth/callback", "native"},
		{"status page over the network", "https://proxy.example.com/auth/callback", "web"},
		{"status page on a LAN address", "http://192.168.1.5:9464/auth/callback", "web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAS(t)
			c, _ := newClient(t, f, config.ServerAuth{}, Options{})
			if tt.redirect == "" {
				if err := login(t, c, Challenge{}); err != nil {
					t.Fatal(err)
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := c.BeginLogin(ctx, tt.redirect); err != nil {
					t.Fatal(err)
				}
			}
			f.snapshot(func(f *fakeAS) {
				if len(f.registered) != 1 {
					t.Fatalf("%d registrations, want 1", len(f.registered))
				}
				if got := f.registered[0]["application_type"]; got != tt.want {
					t.Errorf("application_type = %v, want %q (registration %v)", got, tt.want, f.registered[0])
				}
			})
		})
	}
}

// TestResponseIssuer: the authorization response's iss is checked as RFC
// 9207 says, on both ways back from the browser (the login's loopback
// listener and a page of the caller's, BrowserLogin.Complete): required when
// the metadata says authorization_response_iss_parameter_supported,
// compared exactly with the metadata's issuer whenever present; a code that
// fails the check is never redeemed.
func TestResponseIssuer(t *testing.T) {
	tests := []struct {
		name      string
		supported bool
		iss       func(f *fakeAS) []string
		want      string // "" means the login succeeds
	}{
		{"advertised, right iss", true, func(f *fakeAS) []string { return []string{f.url("/as")} }, ""},
		{"not advertised, no iss", false, nil, ""},
		{"not advertised, right iss", false, func(f *fakeAS) []string { return []string{f.url("/as")} }, ""},
		{"advertised, no iss", true, nil, "it names none, though %AS% says it always does (authorization_response_iss_parameter_supported)"},
		{"advertised, wrong iss", true, func(*fakeAS) []string { return []string{"https://evil.example.com"} }, `it names "https://evil.example.com", the login went to %AS%`},
		{"not advertised, wrong iss", false, func(*fakeAS) []string { return []string{"https://evil.example.com"} }, `it names "https://evil.example.com", the login went to %AS%`},
		{"advertised, iss with a trailing slash", true, func(f *fakeAS) []string { return []string{f.url("/as/")} }, `it names "%AS%/", the login went to %AS%`},
		{"advertised, empty iss", true, func(*fakeAS) []string { return []string{""} }, `it names "", the login went to %AS%`},
		{"advertised, two iss", true, func(f *fakeAS) []string { return []string{f.url("/as"), f.url("/as")} }, `it names "%AS% %AS%", the login went to %AS%`},
	}
	for _, tt := range tests {
		for _, way := range []string{"loopback", "page"} {
			t.Run(tt.name+"/"+way, func(t *testing.T) {
				f := newFakeAS(t)
				f.set(func(f *fakeAS) {
					if tt.supported {
						f.asMeta = func() any { m := f.defaultMeta(); m["authorization_response_iss_parameter_supported"] = true; return m }
					}
					if tt.iss != nil {
						f.redirectIss = tt.iss(f)
					}
				})
				c, _ := newClient(t, f, config.ServerAuth{}, Options{})
				var err error
				if way == "loopback" {
					err = login(t, c, Challenge{})
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					l, berr := c.BeginLogin(ctx, "http://127.0.0.1:9464/auth/callback")
					if berr != nil {
						t.Fatal(berr)
					}
					err = l.Complete(ctx, authorizeRedirect(t, l.URL))
				}
				var tokenRequests int
				f.snapshot(func(f *fakeAS) { tokenRequests = len(f.tokenForms) })
				if tt.want == "" {
					if err != nil || tokenRequests != 1 || !c.HasToken() {
						t.Fatalf("login: %v, %d token requests, token %v; want a token", err, tokenRequests, c.HasToken())
					}
					return
				}
				want := strings.ReplaceAll(tt.want, "%AS%", f.url("/as"))
				if !errors.Is(err, ErrResponseIssuer) || !strings.Contains(err.Error(), want) {
					t.Errorf("login: %v, want %v: …%s", err, ErrResponseIssuer, want)
				}
				if tokenRequests != 0 || c.HasToken() {
					t.Errorf("%d token requests, token %v: the code was redeemed", tokenRequests, c.HasToken())
				}
			})
		}
	}
}

// TestResourceIndicator: the RFC 8707 resource of the authorization, token
// and refresh requests (and of a client_credentials grant) is the
// protected resource metadata's resource exactly as written, when it
// covers the server (same origin, a whole-segment prefix of its path);
// without one it is the canonical server URL; a resource that does not
// cover the server is refused before any authorization request.
func TestResourceIndicator(t *testing.T) {
	tests := []struct {
		name     string
		resource func(f *fakeAS) any // the PRM's resource; nil: absent
		want     func(f *fakeAS) string
	}{
		{"the server's URL", func(f *fakeAS) any { return f.url("/mcp") }, func(f *fakeAS) string { return f.url("/mcp") }},
		{"the origin with a slash", func(f *fakeAS) any { return f.url("/") }, func(f *fakeAS) string { return f.url("/") }},
		{"the origin", func(f *fakeAS) any { return f.url("") }, func(f *fakeAS) string { return f.url("") }},
		{"the server's URL with a slash", func(f *fakeAS) any { return f.url("/mcp/") }, func(f *fakeAS) string { return f.url("/mcp/") }},
		{"no resource", nil, func(f *fakeAS) string { return f.url("/mcp") }},
		{"another origin", func(*fakeAS) any { return "https://evil.example.com/mcp" }, nil},
		{"not a whole-segment prefix", func(f *fakeAS) any { return f.url("/m") }, nil},
		{"another path", func(f *fakeAS) any { return f.url("/other") }, nil},
		{"a fragment", func(f *fakeAS) any { return f.url("/mcp#x") }, nil},
	}
	for _, tt := range tests {
		for _, kind := range []string{KindOAuth, KindClientCredentials} {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				f := newFakeAS(t)
				f.set(func(f *fakeAS) {
					f.expiresIn = 30 // inside refreshMargin: the next request refreshes
					f.prm = func() any {
						doc := map[string]any{"authorization_servers": []string{f.url("/as")}, "scopes_supported": []string{"read"}}
						if tt.resource != nil {
							doc["resource"] = tt.resource(f)
						}
						return doc
					}
				})
				auth := config.ServerAuth{}
				if kind == KindClientCredentials {
					auth = config.ServerAuth{Type: KindClientCredentials, ClientID: "svc", ClientSecret: "svc-secret-value"}
				}
				c, _ := newClient(t, f, auth, Options{})
				err := login(t, c, Challenge{})
				if tt.want == nil {
					if !errors.Is(err, ErrResourceMismatch) {
						t.Errorf("login: %v, want %v", err, ErrResourceMismatch)
					}
					f.snapshot(func(f *fakeAS) {
						if len(f.authorizeQ)+len(f.tokenForms) != 0 {
							t.Errorf("%d authorization and %d token requests were sent", len(f.authorizeQ), len(f.tokenForms))
						}
					})
					return
				}
				if err != nil {
					t.Fatalf("login: %v", err)
				}
				if kind == KindOAuth {
					if code, err := get(t, c, nil); err != nil || code != 200 {
						t.Fatalf("request: %d, %v", code, err)
					}
				}
				want := tt.want(f)
				f.snapshot(func(f *fakeAS) {
					var got []string
					for _, q := range f.authorizeQ {
						got = append(got, "authorize "+q.Get("resource"))
					}
					for _, form := range f.tokenForms {
						got = append(got, form.Get("grant_type")+" "+form.Get("resource"))
					}
					wantAll := []string{"client_credentials " + want}
					if kind == KindOAuth {
						wantAll = []string{"authorize " + want, "authorization_code " + want, "refresh_token " + want}
					}
					if strings.Join(got, "\n") != strings.Join(wantAll, "\n") {
						t.Errorf("resource sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantAll, "\n"))
					}
				})
			})
		}
	}
}

// TestOfflineAccess: offline_access is asked for exactly when the
// authorization server's scopes_supported lists it, whichever source of
// scopes (configuration, challenge, resource metadata) names it.
func TestOfflineAccess(t *testing.T) {
	tests := []struct {
		name       string
		asScopes   []string // nil: the metadata has no scopes_supported
		prmScopes  []string
		challenge  []string
		configured []string
		want       string
	}{
		{"listed by the AS", []string{"read", "offline_access"}, []string{"read"}, nil, nil, "read offline_access"},
		{"listed by the AS and asked by the challenge", []string{"read", "offline_access"}, []string{"read"}, []string{"offline_access", "read"}, nil, "read offline_access"},
		{"in the resource metadata only", []string{"read"}, []string{"read", "offline_access"}, nil, nil, "read"},
		{"in the challenge only", []string{"read"}, []string{"read"}, []string{"read", "offline_access"}, nil, "read"},
		{"configured, not listed by the AS", []string{"read"}, []string{"read"}, nil, []string{"offline_access", "read"}, "read"},
		{"the AS lists no scopes", nil, []string{"read", "offline_access"}, nil, nil, "read"},
		{"the AS lists it, nothing else asked", []string{"offline_access"}, nil, nil, nil, "offline_access"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAS(t)
			f.set(func(f *fakeAS) {
				f.asMeta = func() any {
					m := f.defaultMeta()
					if tt.asScopes != nil {
						m["scopes_supported"] = tt.asScopes
					}
					return m
				}
				f.prm = func() any {
					return map[string]any{"resource": f.url("/mcp"), "authorization_servers": []string{f.url("/as")}, "scopes_supported": tt.prmScopes}
				}
			})
			c, _ := newClient(t, f, config.ServerAuth{Scopes: tt.configured}, Options{})
			if err := login(t, c, Challenge{Scopes: tt.challenge}); err != nil {
				t.Fatal(err)
			}
			f.snapshot(func(f *fakeAS) {
				if got := f.authorizeQ[0].Get("scope"); got != tt.want {
					t.Errorf("scope = %q, want %q", got, tt.want)
				}
			})
		})
	}
}

// TestAuthorizationServerMoves: when the server's protected resource
// metadata names another authorization server than the one of the token
// it refuses, the proxy needs a login, as a first login: no refresh at the
// old authorization server (which may be gone), and the new one gets a
// registration of its own, never the old one's client id; the new token
// then works, without a new Client (no restart).
func TestAuthorizationServerMoves(t *testing.T) {
	for _, oldAS := range []string{"still up", "retired"} {
		t.Run(oldAS, func(t *testing.T) {
			f := newFakeAS(t) // the MCP server and its first authorization server
			f.set(func(f *fakeAS) { f.clientID = "as1-client" })
			as2 := newFakeAS(t)
			as2.set(func(f *fakeAS) { f.clientID = "as2-client" })
			c, st := newClient(t, f, config.ServerAuth{}, Options{})
			if err := login(t, c, Challenge{}); err != nil {
				t.Fatal(err)
			}
			if code, err := get(t, c, nil); err != nil || code != 200 {
				t.Fatalf("request before the move: %d, %v", code, err)
			}

			f.set(func(f *fakeAS) {
				f.prm = func() any {
					return map[string]any{"resource": f.url("/mcp"), "authorization_servers": []string{as2.url("/as")}}
				}
				f.accept = func(tok string) ([]string, bool) {
					as2.mu.Lock()
					defer as2.mu.Unlock()
					scopes, ok := as2.valid[tok]
					return scopes, ok
				}
				if oldAS == "retired" {
					f.token = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusServiceUnavailable) }
				}
			})
			var before int
			f.snapshot(func(f *fakeAS) { before = len(f.tokenForms) })
			_, err := get(t, c, nil)
			var na *NeedsAuthError
			want := "its authorization server changed from " + f.url("/as") + " to " + as2.url("/as")
			if !errors.As(err, &na) || !strings.Contains(err.Error(), want) {
				t.Fatalf("request after the move: %v, want a *NeedsAuthError: %s", err, want)
			}
			f.snapshot(func(f *fakeAS) {
				if n := len(f.tokenForms) - before; n != 0 {
					t.Errorf("%d token requests to the old authorization server after the move", n)
				}
			})
			if c.HasToken() {
				t.Error("the old authorization server's token is still in use")
			}

			if err := login(t, c, na.Challenge); err != nil {
				t.Fatalf("login at the new authorization server: %v", err)
			}
			as2.snapshot(func(as2 *fakeAS) {
				if as2.registers != 1 {
					t.Errorf("%d registrations at the new authorization server, want 1", as2.registers)
				}
				for _, q := range as2.authorizeQ {
					if q.Get("client_id") != "as2-client" {
						t.Errorf("authorization request at the new authorization server with client_id %q", q.Get("client_id"))
					}
				}
				if strings.Join(as2.tokenClient, " ") != "as2-client" {
					t.Errorf("token requests at the new authorization server by %q, want as2-client once", as2.tokenClient)
				}
			})
			if code, err := get(t, c, nil); err != nil || code != 200 {
				t.Fatalf("request after the new login: %d, %v", code, err)
			}
			entries, err := st.Load("web")
			if err != nil || len(entries) != 2 || entries[0].Issuer != as2.url("/as") || !entries[0].hasToken() ||
				entries[1].Issuer != f.url("/as") || entries[1].hasToken() || entries[1].ClientID != "as1-client" {
				t.Errorf("stored entries %+v, %v; want the new issuer's tokens, and the old one's registration without tokens", entries, err)
			}
		})
	}
}

// TestClientCredentialsFollowAMove: a client_credentials server whose
// authorization server changes gets its next token from the new one at
// the first 401, with no user and no new Client.
func TestClientCredentialsFollowAMove(t *testing.T) {
	f := newFakeAS(t)
	as2 := newFakeAS(t)
	c, _ := newClient(t, f, config.ServerAuth{Type: KindClientCredentials, ClientID: "svc", ClientSecret: "svc-secret-value"}, Options{})
	if code, err := get(t, c, nil); err != nil || code != 200 {
		t.Fatalf("request before the move: %d, %v", code, err)
	}
	f.set(func(f *fakeAS) {
		f.prm = func() any {
			return map[string]any{"resource": f.url("/mcp"), "authorization_servers": []string{as2.url("/as")}}
		}
		f.accept = func(tok string) ([]string, bool) {
			as2.mu.Lock()
			defer as2.mu.Unlock()
			scopes, ok := as2.valid[tok]
			return scopes, ok
		}
	})
	if code, err := get(t, c, nil); err != nil || code != 200 {
		t.Fatalf("request after the move: %d, %v", code, err)
	}
	as2.snapshot(func(as2 *fakeAS) {
		if len(as2.tokenForms) != 1 || as2.tokenForms[0].Get("grant_type") != "client_credentials" {
			t.Errorf("token requests at the new authorization server: %v", as2.tokenForms)
		}
	})
	f.snapshot(func(f *fakeAS) {
		if len(f.tokenForms) != 1 {
			t.Errorf("%d token requests at the old authorization server, want only the first", len(f.tokenForms))
		}
	})
}
