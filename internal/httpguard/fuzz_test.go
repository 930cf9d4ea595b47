package httpguard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzRebinding feeds untrusted Host and Origin headers to the checks: no
// panic, and an allowed foreign Origin is always the request's own host or
// loopback to loopback.
func FuzzRebinding(f *testing.F) {
	for _, seed := range [][3]string{
		{"127.0.0.1:9464", "127.0.0.1:9464", ""},
		{"127.0.0.1:9464", "attacker.example", "https://attacker.example"},
		{"[::1]:1", "[::1]:1", "http://[::1]:1"},
		{"10.0.0.1:80", "x:80", "http://x:80"},
		{"127.0.0.1:1", "LOCALHOST", "http://localhost:3000"},
		{"127.0.0.1:1", "127.0.0.1", "::"},
		{"127.0.0.1:1", "\x00", "http://%zz"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, local, host, origin string) {
		r := req(local, "example", origin)
		if r == nil {
			return
		}
		r.Host = host
		rec := httptest.NewRecorder()
		served := false
		Rebinding(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true })).ServeHTTP(rec, r)
		if served != (HostAllowed(r) && OriginAllowed(r)) {
			t.Fatalf("served = %v, but HostAllowed %v, OriginAllowed %v", served, HostAllowed(r), OriginAllowed(r))
		}
		if origin == "" || !OriginAllowed(r) {
			return
		}
		u, err := url.Parse(origin)
		if err != nil {
			t.Fatalf("allowed an unparsable origin %q", origin)
		}
		if !strings.EqualFold(u.Host, host) && !(IsLoopback(u.Hostname()) && IsLoopback(hostOnly(host))) {
			t.Fatalf("allowed origin %q for host %q", origin, host)
		}
	})
}
