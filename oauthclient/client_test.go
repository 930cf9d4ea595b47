package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// newClient builds a Client of f's /mcp with a store in a temp dir.
func newClient(t *testing.T, f *fakeAS, auth config.ServerAuth, opts Options) (*Client, *Store) {
	t.Helper()
	if opts.Store == nil {
		st, err := OpenStore(filepath.Join(t.TempDir(), "auth"))
		if err != nil {
			t.Fatal(err)
		}
		opts.Store = st
	}
	c, err := New(f.serverCfg(auth), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, opts.Store
}

// get sends GET /mcp through a Transport of c and returns the status.
func get(t *testing.T, c *Client, prompt Prompt) (int, error) {
	t.Helper()
	hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Client: c, Prompt: prompt}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func login(t *testing.T, c *Client, ch Challenge) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Login(ctx, ch, browse(t))
}

// TestLoginFlow: a request without a token needs a login; the login
// registers, authorizes with PKCE, state and resource, exchanges, stores
// the tokens 0600 in a 0700 folder; the next request carries the token.
func TestLoginFlow(t *testing.T) {
	f := newFakeAS(t)
	c, st := newClient(t, f, config.ServerAuth{}, Options{})
	_, err := get(t, c, nil)
	var na *NeedsAuthError
	if !errors.As(err, &na) || !errors.Is(err, ErrNeedsAuth) {
		t.Fatalf("first request: err = %v, want a *NeedsAuthError", err)
	}
	if !strings.Contains(err.Error(), "mcp-proxy auth login web") || na.Challenge.ResourceMetadata == "" || strings.Join(na.Challenge.Scopes, " ") != "read" {
		t.Errorf("needs-auth error %q, challenge %+v", err, na.Challenge)
	}
	if err := login(t, c, na.Challenge); err != nil {
		t.Fatalf("login: %v", err)
	}
	if code, err := get(t, c, nil); err != nil || code != 200 {
		t.Fatalf("request after login: %d, %v", code, err)
	}
	f.snapshot(func(f *fakeAS) {
		q := f.authorizeQ[0]
		for k, want := range map[string]string{"code_challenge_method": "S256", "resource": f.url("/mcp"), "scope": "read", "client_id": "reg-client", "response_type": "code"} {
			if q.Get(k) != want {
				t.Errorf("authorize %s = %q, want %q", k, q.Get(k), want)
			}
		}
		if !strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") || !strings.HasSuffix(q.Get("redirect_uri"), "/callback") {
			t.Errorf("redirect_uri = %q", q.Get("redirect_uri"))
		}
		if got := f.tokenForms[0].Get("resource"); got != f.url("/mcp") {
			t.Errorf("token request resource = %q", got)
		}
		if f.registers != 1 {
			t.Errorf("%d registrations, want 1", f.registers)
		}
	})
	fi, err := os.Stat(st.Dir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("store dir: %v, mode %v", err, fi.Mode())
	}
	fi, err = os.Stat(filepath.Join(st.Dir(), "web.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("store file: %v, mode %v", err, fi.Mode())
	}
	leftovers, _ := filepath.Glob(filepath.Join(st.Dir(), ".*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	entries, err := st.Load("web")
	if err != nil || len(entries) != 1 || entries[0].Issuer != f.url("/as") || entries[0].ClientSecret != "reg-secret-value" || entries[0].RefreshToken == "" {
		t.Errorf("stored entries %+v, %v", entries, err)
	}
	// A second Client on the same store (a restart, another process)
	// starts with the token and reuses the registration on the next login.
	c2, _ := newClient(t, f, config.ServerAuth{}, Options{Store: st})
	if code, err := get(t, c2, nil); err != nil || code != 200 {
		t.Errorf("request of a second client on the store: %d, %v", code, err)
	}
}

// TestLoginFailures: bad input from the network ends a login with a clear
// error, and nothing hangs.
func TestLoginFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fakeAS, auth *config.ServerAuth, opts *Options)
		ch    func(f *fakeAS) Challenge
		want  string
		is    error
	}{
		{
			name: "authorization server down",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.prm = func() any {
					return map[string]any{"resource": f.url("/mcp"), "authorization_servers": []string{"http://127.0.0.1:1/as"}}
				}
			},
			want: "authorization server metadata: GET http://127.0.0.1:1/.well-known/oauth-authorization-server/as: dial tcp 127.0.0.1:1: connect: connection refused",
		},
		{
			name:  "metadata not JSON",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) { f.asMeta = func() any { return "<html>" } },
			want:  "is not a JSON object",
		},
		{
			name: "metadata names another issuer",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.asMeta = func() any { m := f.defaultMeta(); m["issuer"] = "https://evil.example.com"; return m }
			},
			is:   ErrIssuerMismatch,
			want: `says "https://evil.example.com"`,
		},
		{
			name: "no PKCE S256",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.asMeta = func() any { m := f.defaultMeta(); m["code_challenge_methods_supported"] = []string{"plain"}; return m }
			},
			is: ErrNoPKCE,
		},
		{
			name: "resource metadata for another resource",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.prm = func() any {
					return map[string]any{"resource": "https://evil.example.com/mcp", "authorization_servers": []string{f.url("/as")}}
				}
			},
			is: ErrResourceMismatch,
		},
		{
			name: "no way to identify the client",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.asMeta = func() any { m := f.defaultMeta(); delete(m, "registration_endpoint"); return m }
			},
			is:   ErrNoClientID,
			want: "set auth.client_id",
		},
		{
			name: "token endpoint answers 400",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.token = func(w http.ResponseWriter, r *http.Request) {
					writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "code expired", "echo": "reg-secret-value"})
				}
			},
			want: `exchanging the authorization code: token endpoint answered HTTP 400: invalid_grant (code expired)`,
		},
		{
			name: "token endpoint answers 500",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.token = func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "reg-secret-value", http.StatusInternalServerError)
				}
			},
			want: "token endpoint answered HTTP 500",
		},
		{
			name: "token endpoint answers 200 without a token",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.token = func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, map[string]string{"token_type": "Bearer", "echo": "reg-secret-value"})
				}
			},
			is:   ErrNoAccessToken,
			want: "exchanging the authorization code: token endpoint " + "%AS%/as/token answered without a usable access token",
		},
		{
			name: "token endpoint answers 200 with a form that does not parse",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.token = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/plain")
					_, _ = io.WriteString(w, "access_token=%zz&x=reg-secret-value")
				}
			},
			is:   ErrNoAccessToken,
			want: "exchanging the authorization code: token endpoint " + "%AS%/as/token answered without a usable access token",
		},
		{
			name: "token endpoint never answers",
			setup: func(f *fakeAS, _ *config.ServerAuth, opts *Options) {
				f.token = func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
					<-r.Context().Done()
				}
				opts.HTTPClient = &http.Client{Timeout: 300 * time.Millisecond}
			},
			want: "did not answer in time",
		},
		{
			name: "callback with a wrong state",
			setup: func(f *fakeAS, _ *config.ServerAuth, _ *Options) {
				f.srv.Config.Handler = stateForger(f.srv.Config.Handler)
			},
			is: ErrStateMismatch,
		},
		{
			name: "nobody completes the login",
			setup: func(f *fakeAS, auth *config.ServerAuth, opts *Options) {
				opts.LoginTimeout = 300 * time.Millisecond
				f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/as/authorize" {
						return // the user never signs in
					}
					f.srvMux().ServeHTTP(w, r)
				})
			},
			is: ErrLoginTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAS(t)
			auth := config.ServerAuth{}
			opts := Options{}
			f.set(func(f *fakeAS) { tt.setup(f, &auth, &opts) })
			c, st := newClient(t, f, auth, opts)
			start := time.Now()
			err := login(t, c, Challenge{ResourceMetadata: f.url("/.well-known/oauth-protected-resource/mcp")})
			if err == nil {
				t.Fatal("login succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want %v", err, tt.is)
			}
			if want := strings.ReplaceAll(tt.want, "%AS%", f.url("")); !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to contain %q", err, want)
			}
			if strings.Contains(err.Error(), "reg-secret-value") {
				t.Errorf("error shows the client secret: %q", err)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("the failure took %s", d)
			}
			if c.HasToken() {
				t.Error("a failed login left a token")
			}
			if entries, _ := st.Load("web"); len(entries) != 0 && entries[0].AccessToken != "" {
				t.Errorf("stored %+v", entries)
			}
		})
	}
}

// stateForger answers the authorization request with a redirect whose
// state is not the login's.
func stateForger(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/as/authorize" {
			q := r.URL.Query()
			http.Redirect(w, r, q.Get("redirect_uri")+"?code=x&state=forged", http.StatusFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TestRefresh: a token about to expire is refreshed before it is sent
// (with the resource parameter); a revoked refresh token needs a login and
// the stored tokens are forgotten.
func TestRefresh(t *testing.T) {
	f := newFakeAS(t)
	f.set(func(f *fakeAS) { f.expiresIn = 30 }) // inside refreshMargin
	c, st := newClient(t, f, config.ServerAuth{}, Options{})
	if err := login(t, c, Challenge{}); err != nil {
		t.Fatal(err)
	}
	first := c.current().AccessToken
	if code, err := get(t, c, nil); err != nil || code != 200 {
		t.Fatalf("request: %d, %v", code, err)
	}
	second := c.current().AccessToken
	if second == first {
		t.Fatal("the expiring token was not refreshed")
	}
	f.snapshot(func(f *fakeAS) {
		last := f.tokenForms[len(f.tokenForms)-1]
		if last.Get("grant_type") != "refresh_token" || last.Get("resource") != f.url("/mcp") {
			t.Errorf("refresh form %v", last)
		}
		if f.mcpAuthSeen[len(f.mcpAuthSeen)-1] != "Bearer "+second {
			t.Errorf("the request did not carry the refreshed token")
		}
	})
	// Revoke everything: the server refuses the token, the refresh is
	// refused, and a login is needed.
	f.set(func(f *fakeAS) { f.valid = map[string][]string{}; f.refreshes = map[string]bool{} })
	_, err := get(t, c, nil)
	var na *NeedsAuthError
	if !errors.As(err, &na) || !strings.Contains(na.Reason, "refresh token was refused") || !strings.Contains(na.Reason, "invalid_grant") {
		t.Fatalf("err = %v, want needs-auth for a refused refresh", err)
	}
	if entries, _ := st.Load("web"); len(entries) != 1 || entries[0].AccessToken != "" || entries[0].RefreshToken != "" || entries[0].ClientID != "reg-client" {
		t.Errorf("after the refused refresh the store holds %+v, want the registration without tokens", entries)
	}
}

// TestRefreshOn401: a token the server refuses is refreshed once and the
// request re-sent with the new one.
func TestRefreshOn401(t *testing.T) {
	f := newFakeAS(t)
	c, _ := newClient(t, f, config.ServerAuth{}, Options{})
	if err := login(t, c, Challenge{}); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeAS) { f.valid = map[string][]string{} }) // the server forgot the token
	if code, err := get(t, c, nil); err != nil || code != 200 {
		t.Fatalf("request: %d, %v", code, err)
	}
	f.snapshot(func(f *fakeAS) {
		n := len(f.mcpAuthSeen)
		if n < 2 || f.mcpAuthSeen[n-1] == f.mcpAuthSeen[n-2] {
			t.Errorf("the request was not re-sent with a new token: %v", f.mcpAuthSeen)
		}
	})
}

// TestStepUp: a 403 insufficient_scope starts a login with the union of
// scopes and the request is re-sent; a 403 for scopes the token holds
// starts nothing.
func TestStepUp(t *testing.T) {
	f := newFakeAS(t)
	c, _ := newClient(t, f, config.ServerAuth{}, Options{})
	if err := login(t, c, Challenge{}); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeAS) { f.requireAll = []string{"read", "write"} })
	if code, err := get(t, c, browse(t)); err != nil || code != 200 {
		t.Fatalf("request: %d, %v", code, err)
	}
	f.snapshot(func(f *fakeAS) {
		if n := len(f.authorizeQ); n != 2 || f.authorizeQ[1].Get("scope") != "read write" {
			t.Errorf("authorize requests %d, last scope %q; want 2 and \"read write\"", n, f.authorizeQ[n-1].Get("scope"))
		}
	})
	// The server now wants a scope the AS never grants: the token holds
	// what was asked, so no further login; the request fails clearly.
	f.set(func(f *fakeAS) {
		f.requireAll = []string{"read", "write", "admin"}
		f.srv.Config.Handler = grantOnly(f.srv.Config.Handler, "read write")
	})
	_, err := get(t, c, browse(t))
	if !errors.Is(err, ErrInsufficientScope) {
		t.Fatalf("err = %v, want ErrInsufficientScope", err)
	}
	f.snapshot(func(f *fakeAS) {
		if n := len(f.authorizeQ); n > 2+MaxTries-1 {
			t.Errorf("%d authorize requests: more than %d tries for one request", n, MaxTries)
		}
	})
}

// grantOnly makes the authorize endpoint grant only scopes.
func grantOnly(next http.Handler, scopes string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/as/authorize" {
			q := r.URL.Query()
			q.Set("scope", scopes)
			r.URL.RawQuery = q.Encode()
		}
		next.ServeHTTP(w, r)
	})
}

// TestTokenStaysHome: the token goes to the server's origin only, never
// across a redirect to another origin.
func TestTokenStaysHome(t *testing.T) {
	f := newFakeAS(t)
	other := newFakeAS(t) // another origin that records Authorization
	c, _ := newClient(t, f, config.ServerAuth{}, Options{})
	if err := login(t, c, Challenge{}); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeAS) {
		next := f.srv.Config.Handler
		f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/away" {
				http.Redirect(w, r, other.url("/mcp"), http.StatusTemporaryRedirect)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	hc := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Client: c}}
	req, _ := http.NewRequest(http.MethodGet, f.url("/away"), nil)
	req.Header.Set("Authorization", "Bearer caller-supplied")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	other.snapshot(func(o *fakeAS) {
		if len(o.mcpAuthSeen) != 1 || o.mcpAuthSeen[0] != "" {
			t.Errorf("the other origin got Authorization %q", o.mcpAuthSeen)
		}
	})
}

// TestClientCredentials: no user; the token comes from the grant, with
// the configured secret (basic) or a private_key_jwt assertion.
func TestClientCredentials(t *testing.T) {
	f := newFakeAS(t)
	c, _ := newClient(t, f, config.ServerAuth{Type: KindClientCredentials, ClientID: "svc", ClientSecret: "svc-secret-value", Scopes: []string{"read"}}, Options{})
	if code, err := get(t, c, nil); err != nil || code != 200 {
		t.Fatalf("request: %d, %v", code, err)
	}
	f.snapshot(func(f *fakeAS) {
		form := f.tokenForms[0]
		if form.Get("grant_type") != "client_credentials" || form.Get("resource") != f.url("/mcp") || form.Get("scope") != "read" || form.Get("client_secret") != "" {
			t.Errorf("token form %v (the secret must go in the Basic header)", form)
		}
	})
}

// TestPickUp: a token another process stores is seen by WaitForToken.
func TestPickUp(t *testing.T) {
	f := newFakeAS(t)
	c, st := newClient(t, f, config.ServerAuth{}, Options{PollInterval: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- c.WaitForToken(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	// "auth login" in another process: its own Store handle and Client.
	other, err := OpenStore(st.Dir())
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := newClient(t, f, config.ServerAuth{}, Options{Store: other})
	if err := login(t, c2, Challenge{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitForToken: %v", err)
	}
	if code, err := get(t, c, nil); err != nil || code != 200 {
		t.Errorf("request with the picked-up token: %d, %v", code, err)
	}
}

// TestRegistrationErrors: a failed registration is described by what
// happened on the wire, without the response body, which may hold a secret.
func TestRegistrationErrors(t *testing.T) {
	tests := []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"not JSON", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"client_id":"x","client_secret":"reg-secret-value",`)
		}, "the registration response is unusable (not JSON, no client_id, or an invalid URL in it; it is not shown: it may hold a client secret)"},
		{"no client_id", func(w http.ResponseWriter, r *http.Request) {
			writeJSONStatus(w, http.StatusCreated, map[string]string{"client_secret": "reg-secret-value"})
		}, "the registration response is unusable"},
		{"refused", func(w http.ResponseWriter, r *http.Request) {
			writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "invalid_redirect_uri", "error_description": "no loopback", "client_secret": "reg-secret-value"})
		}, "refused: invalid_redirect_uri (no loopback)"},
		{"refused, not JSON", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "reg-secret-value", http.StatusBadRequest)
		}, "answered HTTP 400 Bad Request"},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "reg-secret-value", http.StatusBadGateway)
		}, "answered HTTP 502 Bad Gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAS(t)
			f.set(func(f *fakeAS) {
				next := f.mux
				f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/as/register" {
						tt.h(w, r)
						return
					}
					next.ServeHTTP(w, r)
				})
			})
			c, _ := newClient(t, f, config.ServerAuth{}, Options{})
			err := login(t, c, Challenge{})
			want := "dynamic client registration at " + f.url("/as/register") + ": " + tt.want
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "reg-secret-value") {
				t.Errorf("err = %v, want it to contain %q", err, want)
			}
		})
	}
}

// A registration error is described only by what carries no response body:
// an error of oauthex (whose texts quote bodies, client secret included) is
// never shown, whatever its wording.
func TestRegistrationErrShowsNoBody(t *testing.T) {
	const secret = "s3cr3t-client-secret"
	quoting := fmt.Errorf("register: unexpected body %s", `{"client_id":"c","client_secret":"`+secret+`"}`)
	for _, c := range []struct {
		name   string
		err    error
		status *httpStatus
		want   string
	}{
		{"refused", &oauthex.ClientRegistrationError{ErrorCode: "invalid_redirect_uri", ErrorDescription: "no"}, &httpStatus{400, "400 Bad Request"}, "refused: invalid_redirect_uri (no)"},
		{"status", quoting, &httpStatus{500, "500 Internal Server Error"}, "answered HTTP 500 Internal Server Error"},
		{"success unusable", quoting, &httpStatus{201, "201 Created"}, "the registration response is unusable (not JSON, no client_id, or an invalid URL in it; it is not shown: it may hold a client secret)"},
		{"transport", fmt.Errorf("registration request failed: %w", &url.Error{Op: "Post", URL: "https://as.example/register", Err: errors.New("connection refused")}), nil, "the request failed: connection refused"},
		{"no answer, unknown error", quoting, nil, "failed (the response is not shown: it may hold a client secret)"},
	} {
		if got := registrationErr(c.err, c.status); got != c.want || strings.Contains(got, secret) {
			t.Errorf("%s: registrationErr = %q, want %q", c.name, got, c.want)
		}
	}
}
