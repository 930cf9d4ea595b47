package integration

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/testpki"
)

// rsReverseProxy forwards every request to the upstream at target.
func rsReverseProxy(t testing.TB, target string) http.Handler {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
			r.Out.Host = u.Host
		},
		FlushInterval: -1,
	}
}

// TestTLSCustomCA: an https upstream whose certificate comes from a private
// CA connects with tls_ca_cert_path (directly or through a symlink) and its
// tools work. A server without the CA, or whose CA path is missing, a
// directory, a FIFO, over 1 MiB or without a certificate, or whose https
// URL redirects to plain http, fails alone with a clear reason in
// `tools --json` (the plain-http listener gets no request), while the
// other servers of the config keep working.
func TestTLSCustomCA(t *testing.T) {
	t.Parallel()
	ca := testpki.New(t)
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	linkPath := filepath.Join(dir, "ca-link.pem")
	if err := os.Symlink(caPath, linkPath); err != nil {
		t.Fatal(err)
	}
	fifoPath := filepath.Join(dir, "ca.fifo")
	if err := syscall.Mkfifo(fifoPath, 0o600); err != nil {
		t.Fatal(err)
	}
	bigPath := filepath.Join(dir, "big.pem")
	bigPEM := append([]byte(nil), ca.PEM...)
	for len(bigPEM) < 2<<20 {
		bigPEM = append(bigPEM, "padding outside any PEM block, which PEM decoders skip\n"...)
	}
	if err := os.WriteFile(bigPath, bigPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	noCertPath := filepath.Join(dir, "nocert.pem")
	if err := os.WriteFile(noCertPath, []byte("this file holds no certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dirPath := filepath.Join(dir, "a-directory.pem")
	if err := os.Mkdir(dirPath, 0o700); err != nil {
		t.Fatal(err)
	}

	secure := ca.Server(t, rsReverseProxy(t, startFixtureHTTP(t, "-no-weird")))
	var plainRequests, plainConns atomic.Int64
	plain := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainRequests.Add(1)
		http.Error(w, "plain http must never be reached", http.StatusTeapot)
	}))
	plain.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			plainConns.Add(1)
		}
	}
	plain.Start()
	t.Cleanup(plain.Close)
	var redirects atomic.Int64
	redirector := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects.Add(1)
		http.Redirect(w, r, plain.URL+"/mcp", http.StatusTemporaryRedirect)
	}))

	withCA := func(p string) []string {
		return []string{"tls_ca_cert_path: " + q(p), "connect_timeout: 10s"}
	}
	cfg := writeConfig(t, "",
		fixtureServer("ok", []string{"-no-weird"}),
		httpServer("secure", secure.URL+"/mcp", withCA(caPath)...),
		httpServer("linked", secure.URL+"/mcp", withCA(linkPath)...),
		httpServer("noca", secure.URL+"/mcp", "connect_timeout: 10s"),
		httpServer("missing", secure.URL+"/mcp", withCA(filepath.Join(dir, "missing.pem"))...),
		httpServer("isdir", secure.URL+"/mcp", withCA(dirPath)...),
		httpServer("fifo", secure.URL+"/mcp", withCA(fifoPath)...),
		httpServer("huge", secure.URL+"/mcp", withCA(bigPath)...),
		httpServer("nocert", secure.URL+"/mcp", withCA(noCertPath)...),
		httpServer("downgrade", redirector.URL+"/mcp", withCA(caPath)...),
	)
	failing := map[string]string{
		"noca":      "unknown authority",
		"missing":   "no such file",
		"isdir":     "directory",
		"fifo":      "fifo",
		"huge":      "larger than",
		"nocert":    "no pem certificate",
		"downgrade": "redirect",
	}

	t.Run("tools --json", func(t *testing.T) {
		rep := rsToolsReport(t, cfg)
		for _, name := range []string{"ok", "secure", "linked"} {
			if s := rep[name]; s.State != "connected" || len(s.Tools) == 0 {
				t.Errorf("%s: state %q error %q with %d tools, want connected", name, s.State, s.Error, len(s.Tools))
			}
		}
		for name, reason := range failing {
			s, ok := rep[name]
			if !ok {
				t.Errorf("tools --json lacks server %s", name)
				continue
			}
			t.Logf("%s: %s: %s", name, s.State, s.Error)
			if s.State != "failed" && s.State != "parked" {
				t.Errorf("%s: state %q, want failed", name, s.State)
			}
			if !strings.Contains(strings.ToLower(s.Error), reason) {
				t.Errorf("%s: reason %q does not say %q", name, s.Error, reason)
			}
		}
	})

	t.Run("serve", func(t *testing.T) {
		cs, _, _ := sdkStdioProxyCmd(t, cfg, nil, nil)
		names := rsWaitListed(t, cs, callTimeout, "ok__echo", "secure__echo", "linked__echo")
		for _, n := range names {
			if server, _, ok := strings.Cut(n, "__"); ok && failing[server] != "" {
				t.Errorf("tools/list has %s of a server that must have failed", n)
			}
		}
		for _, n := range []string{"secure__echo", "linked__echo", "ok__echo"} {
			if got := contentText(callTool(t, cs, n, map[string]any{"text": "over tls"})); got != "over tls" {
				t.Errorf("%s: %q", n, got)
			}
		}
	})

	if redirects.Load() == 0 {
		t.Errorf("the https front of downgrade was never asked; the redirect check means nothing")
	}
	if n := plainRequests.Load(); n != 0 {
		t.Errorf("the plain-http listener received %d requests after an https→http redirect, want 0", n)
	}
	t.Logf("MEASURE https→http redirect: %d redirects answered, plain listener: %d requests, %d connections", redirects.Load(), plainRequests.Load(), plainConns.Load())
}

// TestTLSConfigErrors: a relative tls_ca_cert_path and an http:// URL with a
// CA are config errors: `validate` exits 2 naming both.
func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, testpki.New(t).PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "",
		fixtureServer("ok", []string{"-no-weird"}),
		httpServer("relative", "https://127.0.0.1:1/mcp", "tls_ca_cert_path: \"certs/ca.pem\""),
		httpServer("plain", "http://127.0.0.1:1/mcp", "tls_ca_cert_path: "+q(ca)),
	)
	stdout, stderr, code := runCLI(t, "validate", "--config", cfg)
	out := stdout + stderr
	if code != 2 {
		t.Errorf("validate exited %d, want 2\n%s", code, out)
	}
	for _, want := range []string{
		"servers.relative.tls_ca_cert_path", "must be an absolute path",
		"servers.plain.url", "https://",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	if _, stderr, code := runCLI(t, "tools", "--json", "--config", cfg); code != 2 {
		t.Errorf("tools on that config exited %d, want 2 (config error)\n%s", code, tail(stderr, 2000))
	}
}
