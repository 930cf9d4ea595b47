package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

// BenchmarkStdioCall measures the proxy's own cost of one tools/call on
// stdio: the wire layer, mcp-go's stdio server and the call path, against
// an upstream that answers at once. Run with -cpuprofile to see where it goes.
func BenchmarkStdioCall(b *testing.B) {
	benchStdioCall(b, oneServerYAML, "fx__echo")
}

// limitedYAML is oneServerYAML with docs/agents.md#overrides-and-rate-limits configured on the called tool:
// an override that renames it, replaces its description and pins one
// argument; server limits (calls a minute, calls in flight) and an agent
// limit over every tool, all too wide to refuse anything.
const limitedYAML = `
startup_wait: 2s
blobs:
  mode: passthrough
servers:
  fx:
    command: fixture
    timeout: 5s
    limits: {per_minute: 1000000000, max_concurrent: 64}
    tools:
      overrides:
        echo: {name: say, description: Say it back., arguments: {lang: en}}
bundles:
  all: {servers: [fx]}
agents:
  bot:
    mcp_bundles: [all]
    limits: [{tools: ["*"], per_minute: 1000000000}]
default_agent: bot
`

// BenchmarkStdioCallOverridesLimits is BenchmarkStdioCall with an override
// and every kind of rate limit on the call's path: what they cost.
func BenchmarkStdioCallOverridesLimits(b *testing.B) {
	benchStdioCall(b, limitedYAML, "say")
}

func benchStdioCall(b *testing.B, yaml, tool string) {
	benchStdioCallWith(b, yaml, tool, nil)
}

// benchStdioCallWith is benchStdioCall with opts (when not nil) changing
// the proxy's options before it is built.
func benchStdioCallWith(b *testing.B, yaml, tool string, opts func(*Options)) {
	up := connected(`{"name":"echo","description":"Echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`)
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello"}],"structuredContent":{"echo":"hello"}}`)
	up.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return result, nil }
	o := Options{Config: parseConfig(b, yaml), Upstreams: map[string]Upstream{"fx": up}, Logger: zerolog.Nop(), Version: "test"}
	if opts != nil {
		opts(&o)
	}
	p := New(o)
	p.Refresh()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, "", nil, inR, outW) }()
	lines := bufio.NewReaderSize(outR, 1<<20)
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			b.Fatal(err)
		}
	}
	read := func() string {
		l, err := lines.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	read()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hello"}}}`)
	if l := read(); !strings.Contains(l, `"text":"hello"`) || strings.Contains(l, "isError") {
		b.Fatalf("first call: %s", l)
	}
	format := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hello"}}}`
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		send(fmt.Sprintf(format, i))
		read()
	}
	b.StopTimer()
	_ = inW.Close()
	cancel()
	<-done
}

// BenchmarkHTTPCall measures tools/call through the Streamable HTTP handler
// with parallel clients on one session, against an upstream that answers at
// once.
func BenchmarkHTTPCall(b *testing.B) {
	up := connected(`{"name":"echo","description":"Echo","inputSchema":{"type":"object"}}`)
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`)
	up.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return result, nil }
	p := newProxy(b, oneServerYAML, map[string]*fakeUpstream{"fx": up})
	srv := httptest.NewServer(p.HTTPHandler(""))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(sid, body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		return client.Do(req)
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	if err != nil {
		b.Fatal(err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`, n.Add(1)))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
