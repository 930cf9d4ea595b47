package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// TestPortTakenStartsNoServer: serve on a port another program holds ends
// at once with exit code 1 and one message that names the address once and
// says what to do; no server is started (its command would leave a file)
// and nothing is logged about servers.
func TestPortTakenStartsNoServer(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	cfgPath := filepath.Join(dir, "c.yaml")
	doc := fmt.Sprintf(`
listen: {transport: http, addr: %q}
blobs: {mode: passthrough}
servers:
  s: {command: sh, args: ["-c", "touch %s; exec sleep 30"]}
`, taken.Addr().String(), marker)
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"serve", "--config", cfgPath}, strings.NewReader(""), &stdout, &stderr)
	if err == nil {
		t.Fatal("serve on a taken port returned no error")
	}
	code := exitRuntime
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if code != exitRuntime {
		t.Errorf("exit code %d, want %d", code, exitRuntime)
	}
	addr := taken.Addr().String()
	want := "cannot serve MCP on " + addr + ": address already in use; is another mcp-proxy (or another program) already using it? Stop it, or choose another address with --listen HOST:PORT or listen.addr in the config"
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
	for _, word := range []string{"startup summary", "upstream", `"server":"s"`} {
		if strings.Contains(stderr.String(), word) {
			t.Errorf("stderr mentions %q although no server should start:\n%s", word, stderr.String())
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the server's command ran although the port was taken")
	}
}

// TestMetricsPortTakenMessage: a taken metrics port is one warning that
// names the address once and the flag or key that moves it.
func TestMetricsPortTakenMessage(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg, err := config.Parse([]byte("blobs: {mode: passthrough}\nmetrics: {listen: \""+taken.Addr().String()+"\"}\n"), stateEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	lns, err := bindListeners(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lns.close()
	if lns.metrics != nil || lns.metricsErr == nil {
		t.Fatalf("metrics listener %v, error %v: want none and an error", lns.metrics, lns.metricsErr)
	}
	msg := lns.metricsErr.Error()
	if strings.Count(msg, taken.Addr().String()) != 1 || !strings.Contains(msg, "--metrics-listen HOST:PORT or metrics.listen") {
		t.Errorf("metrics bind error %q: want the address once and the way to move it", msg)
	}
}

// TestSlowStartIsLogged: servers whose first connection takes longer than
// the notice's delay are named in one log line saying why that can be.
func TestSlowStartIsLogged(t *testing.T) {
	cfg, err := config.Parse([]byte(`
blobs: {mode: passthrough}
servers:
  quiet: {command: sh, args: ["-c", "exec sleep 30"], connect_timeout: 60s}
  fx: {command: `+fmt.Sprintf("%q", fixtureBin(t))+`, args: ["-name", "fx"], connect_timeout: 30s}
`), stateEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	rt, err := startRuntime(context.Background(), cfg, &stderr, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	<-rt.connections()["fx"].Ready()
	rt.slowStart = time.Nanosecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.waitAll(ctx)
	}()
	const msg = "servers still starting; a server run by npx or uvx downloads its package on its first run, which can take a minute (connect_timeout bounds it)"
	for !strings.Contains(stderr.String(), msg) {
		select {
		case <-done:
			t.Fatalf("waitAll returned while quiet was starting:\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	<-done
	var line string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, msg) {
			line = l
		}
	}
	if !strings.Contains(line, `"servers":["quiet"]`) {
		t.Errorf("the notice names other servers than quiet: %s", line)
	}
	if strings.Count(stderr.String(), msg) != 1 {
		t.Errorf("the notice was logged more than once:\n%s", stderr.String())
	}
}
