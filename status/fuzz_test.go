package status

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/oauthclient"
)

// FuzzRequests sends arbitrary requests (method, path and query, form
// body, cookies) to the page as a loopback listener would: nothing panics
// or fails with a 5xx, and no action takes effect without the CSRF token
// of a seed cookie, which only the page hands out.
func FuzzRequests(f *testing.F) {
	for _, seed := range [][4]string{
		{"GET", "/", "", ""},
		{"POST", "/tools/approve", "server=fx&tool=echo&fingerprint=sha256:81c38bc47a74aaaa&csrf=x", csrfCookie + "=" + strings.Repeat("ab", seedBytes)},
		{"POST", "/auth/login", "server=docs", ""},
		{"POST", "/login", "token=" + testToken, sessionCookie + "=x"},
		{"GET", "/auth/callback?state=&code=x&error=%zz", "", ""},
		{"POST", "/tools/keep", "server=fx&tool=echo&fingerprint=sha256:81c38bc47a74aaaa&tool=%00", csrfCookie + "=;;"},
		{"DELETE", "/logout", "\x00", "a=\"b"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	var acted atomic.Bool
	h := New(Options{
		State:   sampleState,
		Approve: func(string, string, string) error { acted.Store(true); return nil },
		BeginLogin: func(context.Context, string, string) (*oauthclient.BrowserLogin, error) {
			acted.Store(true)
			return nil, context.Canceled
		},
	})
	f.Fuzz(func(t *testing.T, method, target, body, cookie string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "http://127.0.0.1:9464"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Cookie", cookie)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9464}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, target, rec.Code, rec.Body.String())
		}
		if acted.Load() {
			t.Fatalf("%s %s with body %q and cookies %q took effect without the page's CSRF token", method, target, body, cookie)
		}
	})
}
