package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// The official TypeScript SDK as the host over stdio (tshost/stdio-host.mjs).
// Node starts its servers with sockets for stdin and stdout, not pipes (so
// does every host that starts servers through Node's child_process, the
// Inspector among them): the proxy reads such a stdin through the runtime's
// poller. Through it the host lists the tools, gets an
// echo of non-ASCII and HTML text back unchanged, a 4 MiB result (far more
// than a socket buffer holds) and 16 concurrent calls, each with its own
// answer; then it closes, and the proxy ends without a race report.
func TestTypeScriptHostStdio(t *testing.T) {
	cfg := writeConfig(t, "blobs: {mode: passthrough}", fixtureServer("fx", nil))
	const bigBytes = 4 << 20
	cmd := exec.CommandContext(testCtx(t, startTimeout+2*callTimeout), nodeBin, "tshost/stdio-host.mjs", proxyBin, "serve", "--config", cfg)
	cmd.Env = append(proxyEnv(), fmt.Sprintf("TSHOST_BIG_BYTES=%d", bigBytes), "TSHOST_CONCURRENT=16")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript host failed: %v\n%s", err, tail(stderr.String(), 40))
	}
	if race := testproc.RaceReport(stderr.String()); race != "" {
		t.Errorf("race report from the proxy:\n%s", race)
	}
	var r struct {
		Stdin      string   `json:"stdin"`
		Tools      []string `json:"tools"`
		Echo       string   `json:"echo"`
		EchoSent   string   `json:"echoSent"`
		BigLength  int      `json:"bigLength"`
		BigIsError bool     `json:"bigIsError"`
		Concurrent []string `json:"concurrent"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("the host's report %q: %v\n%s", stdout.String(), err, tail(stderr.String(), 40))
	}
	if !strings.HasPrefix(r.Stdin, "socket:") {
		t.Errorf("the proxy's stdin is %q, want a socket (what this test is about)", r.Stdin)
	}
	for _, want := range []string{"fx__echo", "fx__big", "mcp_resources", "mcp_prompts"} {
		if !slices.Contains(r.Tools, want) {
			t.Errorf("tools/list lacks %s: %v", want, r.Tools)
		}
	}
	if r.Echo != r.EchoSent {
		t.Errorf("echo = %q, want %q", r.Echo, r.EchoSent)
	}
	// The fixture's big tool makes its whole response line bigBytes long.
	if r.BigIsError || r.BigLength < bigBytes-200 || r.BigLength > bigBytes {
		t.Errorf("big result: %d characters (isError %v), want just under %d", r.BigLength, r.BigIsError, bigBytes)
	}
	if len(r.Concurrent) != 16 {
		t.Fatalf("%d concurrent answers, want 16", len(r.Concurrent))
	}
	for i, got := range r.Concurrent {
		if want := fmt.Sprintf("call %d", i); got != want {
			t.Errorf("concurrent call %d answered %q, want %q", i, got, want)
		}
	}
}
