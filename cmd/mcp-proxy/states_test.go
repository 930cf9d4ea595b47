package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/filter"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// TestStateWordsAgree: a server that failed and is being retried reads
// "failed", with the failure, in the tools report, on the status page and
// in the startup summary alike, even while the retry is under way (the
// moment `tools` used to say "connecting").
func TestStateWordsAgree(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	// The first attempt fails at once; the second never answers. The
	// protocol is pinned: with auto, a child that exits on server/discover
	// is started again at once for initialize, within the same attempt.
	script := fmt.Sprintf(`if [ -e %[1]q ]; then touch %[2]q; exec sleep 60; fi; touch %[1]q; echo "npm error code E404" >&2; exit 1`, first, second)
	cfg, err := config.Parse([]byte(fmt.Sprintf("blobs: {mode: passthrough}\nservers:\n  bad: {command: sh, args: [\"-c\", %q], connect_timeout: 60s, protocol: 2025-11-25}\n", script)), stateEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	rt, err := startRuntime(context.Background(), cfg, &stderr, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	c := rt.connections()["bad"]
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, statErr := os.Stat(second)
		if s := c.Snapshot(); statErr == nil && s.State == upstream.StateConnecting && s.Err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retry did not start within 60s: %+v", c.Snapshot())
		}
		time.Sleep(10 * time.Millisecond)
	}
	a, err := filter.Resolve(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	rep := buildToolsReport(rt, a, nil, nil)
	if len(rep.Servers) != 1 || rep.Servers[0].State != "failed" || !strings.Contains(rep.Servers[0].Error, "npm error code E404") {
		t.Errorf("tools report: %+v, want bad failed with its error", rep.Servers)
	}
	st := rt.statusState()
	if len(st.Servers) != 1 || st.Servers[0].State != "failed" || !strings.Contains(st.Servers[0].Error, "npm error code E404") {
		t.Errorf("status page: %+v, want bad failed with its error", st.Servers)
	}
	rt.summary()
	if !strings.Contains(stderr.String(), `"states":"bad=failed"`) {
		t.Errorf("startup summary does not say bad=failed:\n%s", stderr.String())
	}
}
