// Command handoffhost is the client command of a conformance client
// scenario whose client under test is driven by a Go test instead of a
// host process. The runner starts the scenario's authorization and MCP
// servers and runs `handoffhost <url>`; handoffhost hands the URL to the
// test through the folder $MCP_PROXY_HANDOFF_DIR (it writes the file
// "url") and waits there for the test's verdict (the file "done": "pass"
// exits 0, anything else 1). Meanwhile the test does the scenario's work:
// integration's TestStatusPageBrowser points mcp-proxy at the URL, logs
// in through the status page in Chromium and calls the scenario's tool.
//
// handoffhost gives up after maxWait, so a test that died leaves nothing
// behind; the runner's --timeout is the other bound.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/atomicfile"
)

const (
	// maxWait bounds the wait for the test's verdict: a browser test on a
	// loaded machine takes a minute or two.
	maxWait = 10 * time.Minute
	// pollInterval is how often the verdict file is looked for.
	pollInterval = 100 * time.Millisecond
	// dirEnv names the hand-off folder.
	dirEnv = "MCP_PROXY_HANDOFF_DIR"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "handoffhost:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := os.Getenv(dirEnv)
	if dir == "" || len(os.Args) < 2 {
		return fmt.Errorf("usage: %s=<folder> handoffhost <url>", dirEnv)
	}
	url := os.Args[len(os.Args)-1]
	if err := atomicfile.WriteFile(filepath.Join(dir, "url"), []byte(url), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "handoffhost: handed %s to the test\n", url)
	deadline := time.Now().Add(maxWait)
	for time.Now().Before(deadline) {
		verdict, err := os.ReadFile(filepath.Join(dir, "done"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			time.Sleep(pollInterval)
			continue
		case err != nil:
			return err
		case strings.TrimSpace(string(verdict)) != "pass":
			return fmt.Errorf("the test reported %q", strings.TrimSpace(string(verdict)))
		}
		fmt.Fprintln(os.Stderr, "handoffhost: the test is done")
		return nil
	}
	return fmt.Errorf("no verdict from the test within %s", maxWait)
}
