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
