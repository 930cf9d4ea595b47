//go:build linux || darwin || freebsd || netbsd || openbsd

package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testpki"
	"github.com/rs/zerolog"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadCAPoolTrustsTheCA(t *testing.T) {
	ca := testpki.New(t)
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	dir := t.TempDir()
	caPath := writeFile(t, dir, "ca.pem", ca.PEM)
	link := filepath.Join(dir, "current.pem")
	if err := os.Symlink(caPath, link); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{caPath, link} {
		pool, err := LoadCAPool(path)
		if err != nil {
			t.Fatalf("LoadCAPool(%q): %v", path, err)
		}
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.TLSClientConfig = &tls.Config{RootCAs: pool}
		client := newHTTPClient(base, 1<<20, zerolog.Nop())
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatalf("GET with the CA pool: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello" {
			t.Fatalf("body = %q", body)
		}
	}

	// Without the CA the same server is not trusted: the pool is what
	// made the difference.
	_, err := newHTTPClient(nil, 1<<20, zerolog.Nop()).Get(srv.URL)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("GET without the CA: err = %v, want x509.UnknownAuthorityError", err)
	}
}

func TestLoadCAPoolErrors(t *testing.T) {
	ca := testpki.New(t)
	dir := t.TempDir()
	q := func(p string) string { return fmt.Sprintf("tls_ca_cert_path %q: ", p) }

	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	subdir := filepath.Join(dir, "certs")
	if err := os.Mkdir(subdir, 0o700); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(dir, "dirlink.pem")
	if err := os.Symlink(subdir, dirLink); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifolink.pem")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	garbageDER := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER at all")})
	_, derErr := x509.ParseCertificate([]byte("not DER at all"))
	keyOnly := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})
	oversized := append(append([]byte{}, ca.PEM...), make([]byte, maxCAFileBytes+1-len(ca.PEM))...)

	tests := []struct {
		name string
		path string
		want string
	}{
		{"relative path", "certs/ca.pem", q("certs/ca.pem") + "must be an absolute path"},
		{"missing file", filepath.Join(dir, "missing.pem"), q(filepath.Join(dir, "missing.pem")) + "cannot open: no such file or directory"},
		{"directory", subdir, q(subdir) + "is a directory, not a regular file"},
		{"symlink to a directory", dirLink, q(dirLink) + "is a directory, not a regular file"},
		{"FIFO", fifo, q(fifo) + "is a named pipe (FIFO), not a regular file"},
		{"symlink to a FIFO", fifoLink, q(fifoLink) + "is a named pipe (FIFO), not a regular file"},
		{"socket", sock, ""}, // opening a socket fails; the text is the OS's
		{"oversized file", writeFile(t, dir, "big.pem", oversized), q(filepath.Join(dir, "big.pem")) + "file is larger than 1048576 bytes"},
		{"empty file", writeFile(t, dir, "empty.pem", nil), q(filepath.Join(dir, "empty.pem")) + "file is empty"},
		{"no certificate", writeFile(t, dir, "text.pem", []byte("hello\n")), q(filepath.Join(dir, "text.pem")) + "no PEM CERTIFICATE block found"},
		{"only a key", writeFile(t, dir, "key.pem", keyOnly), q(filepath.Join(dir, "key.pem")) + "no PEM CERTIFICATE block found"},
		{"garbage PEM", writeFile(t, dir, "garbage.pem", []byte("-----BEGIN CERTIFICATE-----\n!!!not base64!!!\n-----END CERTIFICATE-----\n")),
			q(filepath.Join(dir, "garbage.pem")) + "no PEM CERTIFICATE block found"},
		{"garbage DER", writeFile(t, dir, "der.pem", garbageDER), q(filepath.Join(dir, "der.pem")) + "PEM block 1: " + derErr.Error()},
		{"good then garbage", writeFile(t, dir, "mixed.pem", append(append([]byte{}, ca.PEM...), garbageDER...)),
			q(filepath.Join(dir, "mixed.pem")) + "PEM block 2: " + derErr.Error()},
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		tests = append(tests, struct{ name, path, want string }{"device", "/dev/null", q("/dev/null") + "is a device, not a regular file"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := LoadCAPool(tt.path)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("LoadCAPool(%q) blocked", tt.path)
			}
			if err == nil {
				t.Fatalf("LoadCAPool(%q) succeeded", tt.path)
			}
			if tt.want == "" {
				if !strings.HasPrefix(err.Error(), q(tt.path)) {
					t.Fatalf("err = %q, want it to name the path", err)
				}
				return
			}
			if err.Error() != tt.want {
				t.Fatalf("err\n got %q\nwant %q", err, tt.want)
			}
		})
	}
}

func TestLoadCAPoolLimitIsInclusive(t *testing.T) {
	ca := testpki.New(t)
	padded := append(append([]byte{}, ca.PEM...), []byte(strings.Repeat("\n", maxCAFileBytes-len(ca.PEM)))...)
	path := writeFile(t, t.TempDir(), "ca.pem", padded)
	if _, err := LoadCAPool(path); err != nil {
		t.Fatalf("a 1 MiB file was refused: %v", err)
	}
}

func TestRequireHTTPS(t *testing.T) {
	tests := []struct {
		url  string
		want string
	}{
		{"https://mcp.example.com/mcp", ""},
		{"HTTPS://mcp.example.com/mcp", ""},
		{"http://mcp.example.com/mcp?token=abc", `URL "http://mcp.example.com/mcp" is not https://: plain http is refused with tls_ca_cert_path`},
		{"https:///nohost", `URL "https:///nohost" is not https://: plain http is refused with tls_ca_cert_path`},
		{"ws://user:pw@h/x", `URL "ws://h/x" is not https://: plain http is refused with tls_ca_cert_path`},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		err = requireHTTPS(u)
		if got := errText(err); got != tt.want {
			t.Errorf("requireHTTPS(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
	if requireHTTPS(nil) == nil {
		t.Error("requireHTTPS(nil) = nil")
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRedirectToPlainHTTPIsRefused(t *testing.T) {
	ca := testpki.New(t)
	var plainHits atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		plainHits.Add(1)
	}))
	defer plain.Close()
	target := plain.URL + "/mcp?token=s3cr3t"
	secure := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))

	pool, err := LoadCAPool(writeFile(t, t.TempDir(), "ca.pem", ca.PEM))
	if err != nil {
		t.Fatal(err)
	}
	newClient := func(policy func(*http.Request, []*http.Request) error) *http.Client {
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.TLSClientConfig = &tls.Config{RootCAs: pool}
		c := newHTTPClient(base, 1<<20, zerolog.Nop())
		if policy != nil {
			c.CheckRedirect = policy
		}
		return c
	}
	plainClient := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: noDowngradeRedirect,
	}
	clients := map[string]*http.Client{
		"noDowngradeRedirect":      newClient(noDowngradeRedirect),
		"newHTTPClient default":    newClient(nil),
		"plain net/http with hook": plainClient,
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, secure.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer header-secret")
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("the redirect to http:// was followed")
			}
			// net/http wraps the policy's error in a *url.Error naming the
			// whole target; the policy's own text leaves the query out.
			var ue *url.Error
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a *url.Error", err)
			}
			want := fmt.Sprintf("refusing redirect to %q: not https://", plain.URL+"/mcp")
			if name == "newHTTPClient default" {
				want = fmt.Sprintf("refusing redirect from https to %q", plain.URL+"/mcp")
			}
			if got := ue.Err.Error(); got != want {
				t.Fatalf("redirect error\n got %q\nwant %q", got, want)
			}
		})
	}
	if n := plainHits.Load(); n != 0 {
		t.Fatalf("the plain-http server received %d requests, want 0", n)
	}
}

func TestRedirectsWithinHTTPS(t *testing.T) {
	ca := testpki.New(t)
	var hits atomic.Int32
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusTemporaryRedirect)
		default:
			body, _ := io.ReadAll(r.Body)
			_, _ = w.Write(body)
		}
	}))
	pool, err := LoadCAPool(writeFile(t, t.TempDir(), "ca.pem", ca.PEM))
	if err != nil {
		t.Fatal(err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = &tls.Config{RootCAs: pool}
	client := newHTTPClient(base, 1<<20, zerolog.Nop())
	client.CheckRedirect = noDowngradeRedirect

	resp, err := client.Post(srv.URL+"/moved", "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatalf("https→https redirect: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"x":1}` {
		t.Fatalf("the body did not follow the 308: %q", body)
	}

	hits.Store(0)
	_, err = client.Get(srv.URL + "/loop")
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Fatalf("err = %v, want the redirect cap", err)
	}
	// As net/http's default policy: the request that would be the 11th is
	// not sent.
	if n := hits.Load(); n != maxRedirects {
		t.Fatalf("server saw %d requests, want %d", n, maxRedirects)
	}
}
