package authn

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDiscoveredJWKSURIChecked: the jwks_uri read from an https issuer's
// metadata follows the rule of a configured jwks_url: https, or http for a
// loopback host only. An http one on another host is refused with an error
// that names the issuer, and no key is fetched from it.
func TestDiscoveredJWKSURIChecked(t *testing.T) {
	cases := []struct {
		name    string
		jwksURI string
		wantErr bool
	}{
		{"https", "https://keys.example.com/jwks", false},
		{"http on another host", "http://keys.example.com/jwks?tenant=a", true},
		{"http upper-case scheme", "HTTP://keys.example.com/jwks", true},
		{"http on loopback ip", "http://127.0.0.1:9/jwks", false},
		{"http on localhost", "http://localhost:9/jwks", false},
		{"http on ipv6 loopback", "http://[::1]:9/jwks", false},
		{"not a URL scheme", "ftp://keys.example.com/jwks", true},
		{"relative", "/jwks", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var issuer string
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/.well-known/oauth-authorization-server" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": tc.jwksURI})
			}))
			defer srv.Close()
			issuer = srv.URL
			got, err := discoverJWKS(context.Background(), srv.Client(), issuer)
			if !tc.wantErr {
				if err != nil || got != tc.jwksURI {
					t.Fatalf("discoverJWKS = %q, %v; want %q", got, err, tc.jwksURI)
				}
				return
			}
			if err == nil {
				t.Fatalf("discoverJWKS accepted %q", got)
			}
			msg := err.Error()
			if !strings.Contains(msg, "issuer "+issuer+":") {
				t.Errorf("error does not name the issuer: %s", msg)
			}
			if strings.Contains(msg, "tenant=a") || strings.Contains(msg, "/jwks") {
				t.Errorf("error carries the URI's path or query: %s", msg)
			}
			if strings.HasPrefix(strings.ToLower(tc.jwksURI), "http://") {
				if !strings.Contains(msg, "jwks_uri must be https:// (http:// only for a loopback host), got http://keys.example.com") {
					t.Errorf("error = %s", msg)
				}
			}
		})
	}
}

// TestDiscoveryNeedsObjects: an issuer's metadata and key set are JSON
// objects (RFC 8414 §3.2, RFC 7517 §5). A body of "null" is a broken
// document, said so with the URL, not read as an empty object (which made
// it "metadata naming another issuer" or "a key set without keys").
func TestDiscoveryNeedsObjects(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("null"))
	}))
	defer srv.Close()
	want := "GET " + srv.URL + "/.well-known/oauth-authorization-server: not a JSON document of the expected shape"
	if _, err := discoverJWKS(context.Background(), srv.Client(), srv.URL); err == nil || errors.Is(err, errNoJWKS) || err.Error() != want {
		t.Errorf("metadata null: %v, want %s", err, want)
	}
	want = "GET " + srv.URL + "/jwks: not a JSON document of the expected shape"
	if _, err := fetchKeySet(context.Background(), srv.Client(), srv.URL+"/jwks"); err == nil || err.Error() != want {
		t.Errorf("key set null: %v, want %s", err, want)
	}
}
