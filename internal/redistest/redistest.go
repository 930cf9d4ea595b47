// Package redistest starts a real redis-server for tests: Debian's, on a
// free loopback port, in a temp dir, with the durability the docs
// recommend (AOF, appendfsync always). Tests that use it sit behind the
// "redis" build tag, so the default test command needs no Redis.
package redistest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// InstallHint says how to get redis-server where it is missing.
const InstallHint = "redis-server is not installed: apt-get update && apt-get install -y redis-server (Debian's package; .ci/run does the same)"

// startWait bounds how long redis-server may take to accept connections.
const startWait = 20 * time.Second

// Server is one redis-server process. Addr is its host:port. Stop kills it
// (it is also killed when the test ends); Start runs it again on the same
// port and data directory, as after a crash.
type Server struct {
	Addr string
	Dir  string
	Port int

	// TLS is set for a server started by StartTLS: it speaks only TLS.
	TLS bool

	t   testing.TB
	bin string
	cmd *exec.Cmd
}

// Start runs redis-server for t, or fails t with InstallHint when it is
// not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil, nil)
}

// StartTLS is Start for a server that speaks only TLS, with the PEM
// certificate and key given (clients are not asked for certificates).
func StartTLS(t testing.TB, cert, key []byte) *Server {
	t.Helper()
	return start(t, cert, key)
}

func start(t testing.TB, cert, key []byte) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr != nil {
			t.Fatal(InstallHint)
		}
		bin = "/usr/bin/redis-server"
	}
	s := &Server{t: t, bin: bin, Dir: t.TempDir(), Port: testproc.MustFreePort(t), TLS: cert != nil}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	if s.TLS {
		for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
			if err := os.WriteFile(filepath.Join(s.Dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start runs the server (again) and waits until it accepts connections and
// has loaded its data.
func (s *Server) Start() {
	s.t.Helper()
	listen := []string{"port " + strconv.Itoa(s.Port)}
	if s.TLS {
		listen = []string{"port 0", "tls-port " + strconv.Itoa(s.Port), "tls-cert-file " + filepath.Join(s.Dir, "tls.crt"),
			"tls-key-file " + filepath.Join(s.Dir, "tls.key"), "tls-auth-clients no"}
	}
	conf := strings.Join(append(listen,
		"bind 127.0.0.1",
		"dir "+s.Dir,
		"save \"\"",
		"appendonly yes",
		"appendfsync always",
		"protected-mode yes",
		"daemonize no",
		"logfile \"\"",
	), "\n") + "\n"
	confPath := filepath.Join(s.Dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, confPath)
	cmd.Dir = s.Dir
	log, err := os.OpenFile(filepath.Join(s.Dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(startWait)
	for {
		if s.pingOK() {
			return
		}
		if time.Now().After(deadline) {
			s.Kill()
			b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			s.t.Fatalf("redis-server did not answer PING within %s; its log:\n%s", startWait, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pingOK sends a raw PING and reports whether PONG came back (LOADING
// while it replays its AOF is not yet ready).
func (s *Server) pingOK() bool {
	var c net.Conn
	var err error
	if s.TLS {
		// Readiness only: the tests check the certificate themselves.
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", s.Addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
	} else {
		c, err = net.DialTimeout("tcp", s.Addr, time.Second)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// Kill stops the server with SIGKILL, as a crash would, and waits for it.
// It does nothing when the server is not running.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// URL is the server's redis:// URL (rediss:// with TLS).
func (s *Server) URL() string {
	if s.TLS {
		return fmt.Sprintf("rediss://%s/0", s.Addr)
	}
	return fmt.Sprintf("redis://%s/0", s.Addr)
}

// Sentinel is a redis-server in sentinel mode watching one master under
// the name MasterName. It is killed when the test ends.
type Sentinel struct {
	Addr string
	cmd  *exec.Cmd
}

// MasterName is the name a Sentinel knows its master by.
const MasterName = "mcp-proxy-test"

// StartSentinel runs a sentinel for master and waits until it names the
// master's address.
func StartSentinel(t testing.TB, master *Server) *Sentinel {
	t.Helper()
	dir := t.TempDir()
	port := testproc.MustFreePort(t)
	_, masterPort, _ := net.SplitHostPort(master.Addr)
	conf := strings.Join([]string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(port),
		"dir " + dir,
		"sentinel monitor " + MasterName + " 127.0.0.1 " + masterPort + " 1",
		"sentinel down-after-milliseconds " + MasterName + " 1000",
		"logfile \"\"",
	}, "\n") + "\n"
	confPath := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(master.bin, confPath, "--sentinel")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis sentinel: %v", err)
	}
	s := &Sentinel{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(startWait)
	for !s.knowsMaster(master.Addr) {
		if time.Now().After(deadline) {
			t.Fatalf("redis sentinel did not name its master within %s", startWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// knowsMaster asks the sentinel for its master's address.
func (s *Sentinel) knowsMaster(addr string) bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("SENTINEL get-master-addr-by-name " + MasterName + "\r\n")); err != nil {
		return false
	}
	r := bufio.NewReader(c)
	var lines []string
	for range 5 { // *2, $len, host, $len, port
		l, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	host, port, _ := net.SplitHostPort(addr)
	return lines[2] == host && lines[4] == port
}
