//go:build redis

package scaleout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// callWait bounds each call of the messages test: an answer that never
// reaches the waiting replica shows as a call that does not end.
const callWait = 30 * time.Second

// startMessagesReplica runs a replica on the Redis store srv with the
// fixture as fx: its echo, sample (asks the client for sampling) and sleep
// tools.
func startMessagesReplica(t *testing.T, proxyBin, fixtureBin, name string, srv *redistest.Server) *replica {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	cfg := fmt.Sprintf(`log: {level: info, format: json}
store:
  type: redis
  url: %q
  encryption_key: ${MCP_PROXY_STORE_KEY}
servers:
  fx:
    command: %q
    args: ["-name", %q]
    env: {FIXTURE_RECORD: %q}
    required: true
    timeout: 60s
    tools: {include: [echo, sample, sleep]}
`, srv.URL(), fixtureBin, "messages-"+name, record)
	t.Setenv("MCP_PROXY_STORE_KEY", sharedStoreKey)
	return startProxy(t, proxyBin, name, dir, record, cfg)
}

// toolRuns counts the calls of tool each replica's fixture received.
func toolRuns(t *testing.T, tool string, reps ...*replica) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, c := range fixtureCalls(t, reps...) {
		if c.tool == tool {
			out[c.replica]++
		}
	}
	return out
}

// rawPost posts one JSON-RPC message with headers and returns the status
// and the whole body (an SSE stream is read to its end).
func rawPost(ctx context.Context, url, body string, header map[string]string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// TestMessagesBetweenReplicas: three replicas on one Redis behind nginx
// round robin without affinity. A go-sdk session's sampling answers land
// on whichever replica nginx picks and reach the call waiting for them; a
// stateless client's retry of a parked call lands on another replica and
// gets the call's result; kill -9 of the replica running a session's call
// fails that call, which is not run again anywhere, and the session goes on
// through the other two.
func TestMessagesBetweenReplicas(t *testing.T) {
	nginxBinary(t)
	srv := redistest.Start(t)
	proxyBin, fixtureBin := buildBinaries(t)
	var reps []*replica
	var addrs []string
	for _, name := range []string{"a", "b", "c"} {
		r := startMessagesReplica(t, proxyBin, fixtureBin, name, srv)
		reps = append(reps, r)
		addrs = append(addrs, r.addr)
	}
	ng := startRoundRobin(t, addrs)
	url := "http://" + ng.addr + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("sampling answered through any replica", func(t *testing.T) {
		client := mcp.NewClient(&mcp.Implementation{Name: "messages-test", Version: "1.0.0"}, &mcp.ClientOptions{
			CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled-by-client"}}, nil
			},
		})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		for i := range 6 {
			cctx, ccancel := context.WithTimeout(ctx, callWait)
			res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "fx__sample", Arguments: map[string]any{"prompt": fmt.Sprintf("q%d", i)}})
			ccancel()
			if err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || text != "sampled-by-client" {
				t.Fatalf("call %d: isError=%v %q; want the client's answer", i+1, res.IsError, text)
			}
		}
		if runs := toolRuns(t, "sample", reps...); len(runs) < 2 {
			t.Errorf("the sample calls ran on %v; round robin should spread them", runs)
		}
	})

	t.Run("stateless retry on another replica", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
		for i := range 3 {
			first := statelessPost(t, url, "fx__sample", `{"name":"fx__sample","arguments":{"prompt":"p"},`+meta+`}`)
			var r1 struct {
				Result struct {
					InputRequests map[string]json.RawMessage
					RequestState  string
				}
			}
			data := first
			if j := strings.LastIndex(first, "data: "); j >= 0 {
				data = strings.TrimSpace(first[j+len("data: "):])
			}
			if err := json.Unmarshal([]byte(data), &r1); err != nil || len(r1.Result.InputRequests) != 1 {
				t.Fatalf("round %d: first reply = %s", i+1, first)
			}
			var key string
			for k := range r1.Result.InputRequests {
				key = k
			}
			got := statelessPost(t, url, "fx__sample", `{"name":"fx__sample","arguments":{"prompt":"p"},"inputResponses":{"`+key+`":`+
				`{"role":"assistant","model":"m","content":{"type":"text","text":"forty-two"}}},"requestState":"`+r1.Result.RequestState+`",`+meta+`}`)
			if !strings.Contains(got, `"text":"forty-two"`) || strings.Contains(got, `"isError":true`) {
				t.Fatalf("round %d: retry = %s; want the parked call's result", i+1, got)
			}
		}
	})

	t.Run("kill -9 mid-session", func(t *testing.T) {
		hdr := map[string]string{"MCP-Protocol-Version": "2025-11-25"}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"kill","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		hdr["Mcp-Session-Id"] = res.Header.Get("Mcp-Session-Id")
		if status, body, err := rawPost(ctx, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr); err != nil || status != http.StatusAccepted {
			t.Fatalf("notifications/initialized: %d %v %s", status, err, body)
		}
		before := toolRuns(t, "sleep", reps...)
		type outcome struct {
			status int
			body   string
			err    error
		}
		done := make(chan outcome, 1)
		go func() {
			s, b, err := rawPost(ctx, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__sleep","arguments":{"ms":20000}}}`, hdr)
			done <- outcome{s, b, err}
		}()
		var victim *replica
		for deadline := time.Now().Add(callWait); victim == nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the sleep call reached no replica")
			}
			for _, r := range reps {
				if toolRuns(t, "sleep", r)[r.name] > before[r.name] {
					victim = r
				}
			}
		}
		victim.proc.kill(t)
		select {
		case o := <-done:
			if o.err == nil && strings.Contains(o.body, `"slept"`) {
				t.Errorf("the call running on the killed replica %s answered %d %s; want it to fail", victim.name, o.status, o.body)
			}
		case <-time.After(callWait):
			t.Fatal("the call running on the killed replica did not end")
		}
		for i := range 4 {
			text := fmt.Sprintf("after-kill-%d", i)
			status, body, err := rawPost(ctx, url, `{"jsonrpc":"2.0","id":`+fmt.Sprint(10+i)+`,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"`+text+`"}}}`, hdr)
			if err != nil || status != http.StatusOK || !strings.Contains(body, `"text":"`+text+`"`) {
				t.Fatalf("call %d after the kill: %d %v %s", i+1, status, err, body)
			}
		}
		after := toolRuns(t, "sleep", reps...)
		total := 0
		for name, n := range after {
			total += n - before[name]
		}
		if total != 1 {
			t.Errorf("the call of the killed replica ran %d times (%v); want once, never sent again", total, after)
		}
	})
}
