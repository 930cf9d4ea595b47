package oauthclient

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// authorizeRedirect plays a browser at the authorization URL and returns
// the query of the redirect the authorization server answers with.
func authorizeRedirect(t *testing.T, authURL string) url.Values {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query()
}

// TestBrowserLogin: a login begun for a redirect URI the caller serves
// registers that URI, sends state, PKCE S256 and resource, and completes
// from the redirect's query once: the token is stored and the waiting
// connection wakes at once.
func TestBrowserLogin(t *testing.T) {
	f := newFakeAS(t)
	c, st := newClient(t, f, config.ServerAuth{}, Options{})
	if _, err := get(t, c, nil); !errors.Is(err, ErrNeedsAuth) {
		t.Fatalf("first request: %v, want needs auth", err)
	}
	const redirect = "http://127.0.0.1:9464/auth/callback"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.BeginLogin(ctx, redirect)
	if err != nil {
		t.Fatal(err)
	}
	if l.Server != "web" || l.State == "" || time.Until(l.Expires) < DefaultLoginTimeout-time.Minute {
		t.Errorf("login %+v", l)
	}
	q := authorizeRedirect(t, l.URL)
	f.snapshot(func(f *fakeAS) {
		aq := f.authorizeQ[0]
		for k, want := range map[string]string{"redirect_uri": redirect, "state": l.State, "code_challenge_method": "S256",
			"resource": f.url("/mcp"), "scope": "read", "client_id": "reg-client"} {
			if aq.Get(k) != want {
				t.Errorf("authorize %s = %q, want %q", k, aq.Get(k), want)
			}
		}
	})

	woke := make(chan error, 1)
	go func() { woke <- c.WaitForToken(ctx) }()
	if err := l.Complete(ctx, q); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(DefaultPollInterval / 2):
		t.Fatal("WaitForToken did not wake at once when the same Client completed the login")
	}
	if code, err := get(t, c, nil); err != nil || code != http.StatusOK {
		t.Fatalf("request after the login: %d, %v", code, err)
	}
	entries, err := st.Load("web")
	if err != nil || len(entries) != 1 || entries[0].RedirectURI != redirect || entries[0].AccessToken == "" {
		t.Fatalf("stored %+v, %v", entries, err)
	}
	f.snapshot(func(f *fakeAS) {
		form := f.tokenForms[0]
		if form.Get("redirect_uri") != redirect || form.Get("resource") != f.url("/mcp") || form.Get("code_verifier") == "" {
			t.Errorf("token request %v", form)
		}
	})
	if err := l.Complete(ctx, q); !errors.Is(err, ErrLoginOver) {
		t.Errorf("second Complete: %v, want ErrLoginOver", err)
	}

	// The registration is reused for the same redirect URI only.
	if _, err := c.BeginLogin(ctx, redirect); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginLogin(ctx, "http://localhost:9464/auth/callback"); err != nil {
		t.Fatal(err)
	}
	f.snapshot(func(f *fakeAS) {
		if f.registers != 2 {
			t.Errorf("%d registrations, want 2 (one per redirect URI)", f.registers)
		}
	})
}

// TestBrowserLoginRefusals: a redirect with another login's state, the
// authorization server's refusal or no code fails the login without a
// token request; a login past its time is over; bad redirect URIs and
// client_credentials servers are refused before anything is sent.
func TestBrowserLoginRefusals(t *testing.T) {
	f := newFakeAS(t)
	c, _ := newClient(t, f, config.ServerAuth{}, Options{})
	ctx := context.Background()
	begin := func() *BrowserLogin {
		t.Helper()
		l, err := c.BeginLogin(ctx, "http://127.0.0.1:9464/auth/callback")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, tc := range []struct {
		name  string
		query func(l *BrowserLogin) url.Values
		want  string
	}{
		{"wrong state", func(l *BrowserLogin) url.Values { return url.Values{"state": {"x" + l.State}, "code": {"c"}} }, ErrStateMismatch.Error()},
		{"refused", func(l *BrowserLogin) url.Values {
			return url.Values{"state": {l.State}, "error": {"access_denied"}, "error_description": {"the user said no"}}
		}, "the authorization server refused: access_denied (the user said no)"},
		{"no code", func(l *BrowserLogin) url.Values { return url.Values{"state": {l.State}} }, "the callback carries no authorization code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := begin()
			err := l.Complete(ctx, tc.query(l))
			if err == nil || err.Error() != tc.want {
				t.Errorf("Complete: %v, want %q", err, tc.want)
			}
			if err := l.Complete(ctx, url.Values{"state": {l.State}, "code": {"c"}}); !errors.Is(err, ErrLoginOver) {
				t.Errorf("Complete after a failure: %v, want ErrLoginOver", err)
			}
		})
	}
	f.snapshot(func(f *fakeAS) {
		if len(f.tokenForms) != 0 {
			t.Errorf("%d token requests after refused callbacks", len(f.tokenForms))
		}
	})

	l := begin()
	l.Expires = time.Now().Add(-time.Second)
	if err := l.Complete(ctx, authorizeRedirect(t, l.URL)); !errors.Is(err, ErrLoginOver) {
		t.Errorf("Complete after Expires: %v", err)
	}

	for _, bad := range []string{"/auth/callback", "ftp://h/cb", "http://user:pw@h/cb", "http://h/cb#frag", "http://%zz"} {
		if _, err := c.BeginLogin(ctx, bad); err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("BeginLogin(%q) = %v, want a refusal without the password", bad, err)
		}
	}
	cc, _ := newClient(t, f, config.ServerAuth{Type: KindClientCredentials, ClientID: "m2m", ClientSecret: "s"}, Options{})
	if _, err := cc.BeginLogin(ctx, "http://127.0.0.1:9464/auth/callback"); err == nil {
		t.Error("BeginLogin of a client_credentials server succeeded")
	}
}
