package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// runGoSDKFake serves the official Go SDK's server on stdio. Like every
// go-sdk server it sends no log message until the client sets a level. Its
// tool "log" logs one message at the level it is given; "exit" ends the
// process (a crash, for the reconnect).
func runGoSDKFake() {
	s := sdk.NewServer(&sdk.Implementation{Name: "gosdk-fake", Version: "1.0"}, nil)
	type logArgs struct {
		Level string `json:"level"`
		Text  string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "log"}, func(ctx context.Context, req *sdk.CallToolRequest, a logArgs) (*sdk.CallToolResult, any, error) {
		err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: sdk.LoggingLevel(a.Level), Logger: "fake", Data: a.Text})
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "logged"}}}, nil, err
	})
	sdk.AddTool(s, &sdk.Tool{Name: "exit"}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = s.Run(ctx, &sdk.StdioTransport{})
}

// logMessages records the data of every notifications/message.
type logMessages struct {
	mu   sync.Mutex
	data []string
}

func (m *logMessages) on(server, method string, params json.RawMessage) {
	if method != "notifications/message" {
		return
	}
	var p struct {
		Data string `json:"data"`
	}
	_ = json.Unmarshal(params, &p)
	m.mu.Lock()
	m.data = append(m.data, p.Data)
	m.mu.Unlock()
}

func (m *logMessages) has(text string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.data {
		if d == text {
			return true
		}
	}
	return false
}

// TestLogLevelAppliedOnConnect is issue 12, item 14: a level set before the
// server connected (a host sets it right after initialize, while upstreams
// still connect) reaches the server when it connects, and again when it
// reconnects, so its log messages arrive; a level set while connected is
// sent at once.
func TestLogLevelAppliedOnConnect(t *testing.T) {
	cfg := fakeServer(t, "gosdk")
	cfg.Env = map[string]string{"UPSTREAM_FAKE": "gosdk"}
	msgs := &logMessages{}
	c := New(cfg, Options{OnNotification: msgs.on, Backoff: fastRetry})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if err := c.SetLogLevel(ctx, "info"); err != nil {
		t.Fatalf("SetLogLevel before Start: %v", err)
	}
	c.Start(ctx)
	<-c.Ready()
	mustConnected(t, c)

	logged := func(level, text string) {
		t.Helper()
		params, _ := json.Marshal(map[string]any{"name": "log", "arguments": map[string]string{"level": level, "text": text}})
		if _, err := c.Request(ctx, "tools/call", params); err != nil {
			t.Fatalf("log %s: %v", text, err)
		}
	}
	arrives := func(text string) bool {
		deadline := time.Now().Add(3 * time.Second)
		for !msgs.has(text) {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
		return true
	}
	logged("info", "first connection")
	if !arrives("first connection") {
		t.Fatal("a level set before the server connected was not applied: its log message never arrived")
	}

	// Set while connected: sent now.
	if err := c.SetLogLevel(ctx, "error"); err != nil {
		t.Fatal(err)
	}
	logged("info", "filtered")
	logged("error", "after error level")
	if !arrives("after error level") || msgs.has("filtered") {
		t.Fatalf("the level set while connected was not applied: %q", msgs.data)
	}

	// The server crashes and the Conn reconnects: the new process gets the
	// level before anything else.
	gen := c.Snapshot().Generation
	params, _ := json.Marshal(map[string]any{"name": "exit", "arguments": map[string]any{}})
	_, _ = c.Request(ctx, "tools/call", params)
	waitSnapshot(t, c, 20*time.Second, "reconnected", func(s *Snapshot) bool { return s.State == StateConnected && s.Generation > gen })
	logged("warning", "filtered again")
	logged("critical", "after reconnect")
	if !arrives("after reconnect") || msgs.has("filtered again") {
		t.Fatalf("the level was not applied on reconnect: %q", msgs.data)
	}
}

func TestSetLogLevelRefusesUnknown(t *testing.T) {
	c := New(fakeServer(t, "x"), Options{})
	err := c.SetLogLevel(context.Background(), "verbose")
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `unknown log level "verbose"`) {
		t.Fatalf("SetLogLevel(verbose) = %v", err)
	}
}
