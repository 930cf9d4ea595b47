package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
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

// TestLimitRequests: the HTTP and SSE transports' server requests are
// answered through limitRequests: at most maxServerRequests run at once, and
// one more is refused at once with an error while they do.
func TestLimitRequests(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, maxServerRequests)
	h := limitRequests(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		started <- struct{}{}
		<-release
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	})
	req := transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId("r"), Method: "elicitation/create"}
	var wg sync.WaitGroup
	for range maxServerRequests {
		wg.Go(func() {
			if resp, err := h(context.Background(), req); err != nil || resp.Error != nil {
				t.Errorf("a request within the bound: %v %+v", err, resp)
			}
		})
	}
	for range maxServerRequests {
		<-started
	}
	t0 := time.Now()
	resp, err := h(context.Background(), req)
	if err != nil || resp.Error == nil || resp.Error.Message != tooManyServerRequests {
		t.Errorf("the request over the bound: %v %+v, want the refusal", err, resp)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("the refusal took %s", d)
	}
	close(release)
	wg.Wait()
	if resp, err := h(context.Background(), req); err != nil || resp.Error != nil {
		t.Errorf("after the others ended: %v %+v", err, resp)
	}
}
