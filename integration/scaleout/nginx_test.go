package scaleout

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// nginxMissing is the whole failure message when nginx is not installed:
// the test never skips.
const nginxMissing = "nginx not installed: run .ci/run (apt-get install nginx-light)"

// The addresses deploy/nginx/mcp-proxy.conf is written for; the test puts
// its own replicas and listen port in their place.
var (
	templateReplicas = [2]string{"127.0.0.1:8081", "127.0.0.1:8082"}
	templateListen   = "listen 8080;"
)

// debianNginx is where Debian's nginx packages install the binary, which
// is not on a non-root user's PATH.
const debianNginx = "/usr/sbin/nginx"

// nginxBinary returns the nginx to run, or fails the test.
func nginxBinary(t *testing.T) string {
	t.Helper()
	bin, ok := findNginx(debianNginx)
	if !ok {
		t.Fatal(nginxMissing)
	}
	return bin
}

// findNginx looks for nginx on PATH, then at fallback.
func findNginx(fallback string) (string, bool) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, true
	}
	if st, err := os.Stat(fallback); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return fallback, true
	}
	return "", false
}

func TestFindNginx(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if p, ok := findNginx(filepath.Join(dir, "absent")); ok {
		t.Fatalf("findNginx found %s in an empty PATH", p)
	}
	fake := filepath.Join(dir, "nginx")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, ok := findNginx(filepath.Join(dir, "absent")); !ok || p != fake {
		t.Fatalf("findNginx = %q, %v; want the nginx on PATH", p, ok)
	}
	t.Setenv("PATH", t.TempDir())
	if p, ok := findNginx(fake); !ok || p != fake {
		t.Fatalf("findNginx = %q, %v; want the fallback", p, ok)
	}
}

// renderSite turns the deployment example into the test's site config:
// each template replica address (plain in upstream blocks, regex-escaped
// in the tag map) becomes the matching test replica, and the listen
// directive becomes listen. It refuses a template that mentions a template
// port in any other form, so the test cannot silently run a config that
// still points somewhere else.
func renderSite(tmpl string, replicas [2]string, listen string) (string, error) {
	if n := strings.Count(tmpl, templateListen); n != 1 {
		return "", fmt.Errorf("template has %d %q directives, want 1", n, templateListen)
	}
	pairs := []string{templateListen, "listen " + listen + ";"}
	for i, from := range templateReplicas {
		_, port, _ := net.SplitHostPort(from)
		escaped := regexp.QuoteMeta(from)
		plain, quoted := strings.Count(tmpl, from), strings.Count(tmpl, escaped)
		if plain == 0 || quoted == 0 {
			return "", fmt.Errorf("template names %s %d times plainly and %d times regex-escaped; want both", from, plain, quoted)
		}
		if all := strings.Count(tmpl, port); all != plain+quoted {
			return "", fmt.Errorf("template mentions port %s %d times, only %d of them as %s", port, all, plain+quoted, from)
		}
		pairs = append(pairs, from, replicas[i], escaped, regexp.QuoteMeta(replicas[i]))
	}
	// One pass, so a test port that happens to equal a template port is
	// not replaced twice.
	out := strings.NewReplacer(pairs...).Replace(tmpl)
	return out, nil
}

// nginxServer is a running nginx: its listen address and access log.
type nginxServer struct {
	proc      *proc
	addr      string
	accessLog string
}

// accessLogFormat records, per request, where nginx sent it and which
// session ids it saw and sent back.
const accessLogFormat = `'$request_method $status upstream="$upstream_addr" ` +
	`sid_in="$http_mcp_session_id" sid_out="$mcp_proxy_session_out" time=$request_time'`

// startNginx runs nginx in the foreground as the current user, with every
// path (pid, logs, temp files) under a temporary prefix, in front of the
// two replicas. The listen port is picked free just before; if another
// process takes it first, nginx is started again on a new one.
func startNginx(t *testing.T, replicas [2]string) *nginxServer {
	t.Helper()
	return startNginxSite(t, "mcp-proxy.conf", accessLogFormat, func(tmpl, listen string) (string, error) {
		return renderSite(tmpl, replicas, listen)
	})
}

// startNginxSite is startNginx for the example deploy/nginx/<file>, which
// render turns into the test's site config for the listen address, with
// the access log in logFormat.
func startNginxSite(t *testing.T, file, logFormat string, render func(tmpl, listen string) (string, error)) *nginxServer {
	t.Helper()
	bin := nginxBinary(t)
	root, err := testproc.ModuleRoot(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "deploy", "nginx", file))
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		prefix := t.TempDir()
		site, err := render(string(tmpl), addr)
		if err != nil {
			t.Fatalf("deploy/nginx/%s: %v", file, err)
		}
		conf := writeNginxConf(t, prefix, site, logFormat)
		cmd := exec.Command(bin, "-p", prefix+"/", "-c", conf)
		p := startProc(t, "nginx", cmd, nil)
		p.cleanExit = true
		err = waitAccepting(p, addr)
		if err == nil {
			return &nginxServer{proc: p, addr: addr, accessLog: filepath.Join(prefix, "access.log")}
		}
		<-p.done
		if attempt < 3 && strings.Contains(p.stderr.String(), "Address already in use") {
			continue
		}
		t.Fatalf("nginx: %v\n%s", err, tail(p.stderr.String(), 4000))
	}
}

// writeNginxConf writes the main config around the site config.
func writeNginxConf(t *testing.T, prefix, site, logFormat string) string {
	t.Helper()
	for _, d := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sitePath := filepath.Join(prefix, "mcp-proxy.conf")
	if err := os.WriteFile(sitePath, []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("daemon off;\nmaster_process on;\nworker_processes 1;\n")
	fmt.Fprintf(&b, "pid %s;\n", filepath.Join(prefix, "nginx.pid"))
	b.WriteString("error_log stderr notice;\n")
	if os.Geteuid() == 0 {
		// As root nginx would switch its workers to "nobody", who cannot
		// read the test's temporary directories.
		b.WriteString("user " + currentUserAndGroup(t) + ";\n")
	}
	b.WriteString("events { worker_connections 512; }\nhttp {\n")
	fmt.Fprintf(&b, "    log_format scaleout %s;\n", logFormat)
	fmt.Fprintf(&b, "    access_log %s scaleout;\n", filepath.Join(prefix, "access.log"))
	for _, kind := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "    %s_temp_path %s;\n", kind, filepath.Join(prefix, "tmp", kind))
	}
	fmt.Fprintf(&b, "    include %s;\n}\n", sitePath)
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

func currentUserAndGroup(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	return u.Username + " " + g.Name
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitAccepting waits until addr accepts TCP connections, or p exits.
func waitAccepting(p *proc, addr string) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before accepting connections on %s: %v", addr, p.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not accepting connections on %s after %s", addr, startTimeout)
}

func TestRenderSite(t *testing.T) {
	tmpl := "upstream a { server 127.0.0.1:8081; server 127.0.0.1:8082; }\n" +
		`map $upstream_addr $t { "~127\.0\.0\.1:8081$" r1; "~127\.0\.0\.1:8082$" r2; }` + "\n" +
		"server { listen 8080; }\n"
	got, err := renderSite(tmpl, [2]string{"127.0.0.1:40001", "127.0.0.1:40002"}, "127.0.0.1:40000")
	if err != nil {
		t.Fatal(err)
	}
	want := "upstream a { server 127.0.0.1:40001; server 127.0.0.1:40002; }\n" +
		`map $upstream_addr $t { "~127\.0\.0\.1:40001$" r1; "~127\.0\.0\.1:40002$" r2; }` + "\n" +
		"server { listen 127.0.0.1:40000; }\n"
	if got != want {
		t.Errorf("renderSite:\n%s\nwant:\n%s", got, want)
	}
	// Test ports equal to the template's own are replaced once, not twice.
	swapped, err := renderSite(tmpl, [2]string{"127.0.0.1:8082", "127.0.0.1:8081"}, "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	if want := "upstream a { server 127.0.0.1:8082; server 127.0.0.1:8081; }\n"; !strings.HasPrefix(swapped, want) {
		t.Errorf("renderSite with swapped ports:\n%s\nwant it to start with:\n%s", swapped, want)
	}
	for name, bad := range map[string]string{
		"no listen":       strings.Replace(tmpl, "listen 8080;", "listen 9;", 1),
		"no escaped form": strings.Replace(tmpl, `127\.0\.0\.1:8082`, `localhost:9`, 1),
		"stray port":      tmpl + "# see port 8081\n",
	} {
		if _, err := renderSite(bad, [2]string{"127.0.0.1:1", "127.0.0.1:2"}, "127.0.0.1:3"); err == nil {
			t.Errorf("%s: renderSite succeeded, want an error", name)
		}
	}
}
