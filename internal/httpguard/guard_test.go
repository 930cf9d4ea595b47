package httpguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// req builds a request that reached the listener on local, with Host and
// Origin (empty: none); nil when local is not an IP address and port.
func req(local, host, origin string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://"+host+"/metrics", nil)
	r.Host = host
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if local != "" {
		ap, err := netip.ParseAddrPort(local) // no name lookups
		if err != nil {
			return nil
		}
		addr := net.TCPAddrFromAddrPort(ap)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	}
	return r
}

func TestRebinding(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := Rebinding(ok)
	cases := []struct {
		name                string
		local, host, origin string
		want                int
		body                string
	}{
		{"loopback listener, loopback host", "127.0.0.1:9464", "127.0.0.1:9464", "", http.StatusTeapot, ""},
		{"loopback listener, localhost", "127.0.0.1:9464", "localhost:9464", "", http.StatusTeapot, ""},
		{"loopback listener, ipv6 host", "[::1]:9464", "[::1]:9464", "", http.StatusTeapot, ""},
		{"loopback listener, rebound name", "127.0.0.1:9464", "attacker.example:9464", "", http.StatusForbidden,
			"Forbidden: invalid Host header \"attacker.example:9464\"\n"},
		{"zoned loopback listener, rebound name", "[::1%lo]:9464", "attacker.example:9464", "", http.StatusForbidden,
			"Forbidden: invalid Host header \"attacker.example:9464\"\n"},
		{"zoned loopback listener, localhost", "[::1%lo]:9464", "localhost:9464", "", http.StatusTeapot, ""},
		{"public listener, any host", "10.1.2.3:9464", "proxy.internal:9464", "", http.StatusTeapot, ""},
		{"foreign origin", "127.0.0.1:9464", "127.0.0.1:9464", "https://attacker.example", http.StatusForbidden,
			"Forbidden: Origin \"https://attacker.example\" is not allowed\n"},
		{"own origin", "10.1.2.3:9464", "proxy.internal:9464", "http://proxy.internal:9464", http.StatusTeapot, ""},
		{"loopback origin to loopback host", "127.0.0.1:9464", "localhost:9464", "http://127.0.0.1:3000", http.StatusTeapot, ""},
		{"loopback origin to public host", "10.1.2.3:9464", "proxy.internal:9464", "http://127.0.0.1:3000", http.StatusForbidden, ""},
		{"unparsable origin", "127.0.0.1:9464", "127.0.0.1:9464", "::", http.StatusForbidden, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req(c.local, c.host, c.origin))
			if rec.Code != c.want {
				t.Errorf("status %d, want %d", rec.Code, c.want)
			}
			if c.body != "" && rec.Body.String() != c.body {
				t.Errorf("body %q, want %q", rec.Body.String(), c.body)
			}
		})
	}
}

func TestReachedLoopback(t *testing.T) {
	for _, c := range []struct {
		local string
		want  bool
	}{
		{"127.0.0.1:9464", true},
		{"[::1]:9464", true},
		{"[::1%lo]:9464", true},
		{"10.1.2.3:9464", false},
		{"", false}, // unknown
	} {
		if got := ReachedLoopback(req(c.local, "localhost", "")); got != c.want {
			t.Errorf("ReachedLoopback(local %q) = %v, want %v", c.local, got, c.want)
		}
	}
}
