package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStalledChildReconnects is issue 12, item 8: a stdio server that floods
// pings and stops reading its stdin is treated as hung once a write to it
// makes no progress for the stall timeout: the connection drops with that
// reason and a new process is started.
func TestStalledChildReconnects(t *testing.T) {
	var logs logBuffer
	var seen snapshots // the failed state may last less than a poll: every published one is kept
	c := start(t, fakeServer(t, "flood"), Options{Logger: testLogger(&logs), Backoff: fastRetry, StallTimeout: time.Second, OnSnapshot: seen.add})
	first := mustConnected(t, c)
	params, _ := json.Marshal(map[string]any{"name": "pingflood", "arguments": map[string]any{}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Request(ctx, "tools/call", params); err != nil {
		t.Fatalf("pingflood: %v", err)
	}
	logs.waitLog(t, 15*time.Second, "the server stopped reading its stdin; treating it as hung")
	i, down, _ := seen.wait(t, 15*time.Second, 0, "dropped", func(s *Snapshot) bool { return s.State == StateFailed })
	if down.Err == nil || !strings.Contains(down.Err.Error(), "stopped reading its stdin") {
		t.Errorf("dropped with %v, want the stall", down.Err)
	}
	seen.wait(t, 20*time.Second, i, "reconnected", func(s *Snapshot) bool {
		return s.State == StateConnected && s.Generation > first.Generation
	})
	callTool(t, c, "echo", map[string]any{"after": "reconnect"})
}
