package oauthclient

import (
	"context"
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
