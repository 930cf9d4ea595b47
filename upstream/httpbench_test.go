package upstream

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// BenchmarkHTTPUpstreamCall measures one tools/call through Conn.Request to
// a Streamable HTTP server in the same process (mcp-go's, which answers
// with a JSON body): the wire's POST, the answer read and routed, the
// result handed back. The server's own cost is in the figure too: compare
// runs of two builds.
func BenchmarkHTTPUpstreamCall(b *testing.B) {
	ts := httptest.NewServer(server.NewStreamableHTTPServer(newMCPGoServer()))
	defer ts.Close()
	c := New(httpServer("bench", ts.URL+"/mcp"), Options{Backoff: noRetry})
	c.Start(context.Background())
	defer c.Close()
	select {
	case <-c.Ready():
	case <-time.After(30 * time.Second):
		b.Fatal("not ready")
	}
	if s := c.Snapshot(); s.State != StateConnected {
		b.Fatalf("state %s: %v", s.State, s.Err)
	}
	params := json.RawMessage(`{"name":"hello","arguments":{"who":"bench"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		raw, err := c.Request(ctx, "tools/call", params)
		if err != nil || !strings.Contains(string(raw), "hello bench") {
			b.Fatalf("%s, %v", raw, err)
		}
	}
}
