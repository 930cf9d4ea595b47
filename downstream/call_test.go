package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

const ghToken = "ghp_0123456789abcdefABCDEF0123456789abcd"

func TestClassify(t *testing.T) {
	entry := &ToolEntry{Exposed: "fx__echo", Server: "fx", Name: "echo"}
	bg := context.Background()
	canceled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancelExpired := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancelExpired()

	tests := []struct {
		name     string
		result   string
		err      error
		ctx      context.Context
		cctx     context.Context
		outcome  string
		code     int
		message  string // exact, or a prefix when it ends in "..."
		mustLack string
	}{
		{name: "ok", result: `{"content":[]}`, outcome: metrics.OutcomeOK},
		{name: "tool error", result: `{"content":[],"isError":true}`, outcome: metrics.OutcomeToolError},
		{name: "isError false", result: `{"isError":false}`, outcome: metrics.OutcomeOK},
		{name: "canceled", err: context.Canceled, ctx: canceled, cctx: canceled,
			outcome: metrics.OutcomeCanceled, code: -32000, message: "request cancelled"},
		{name: "timeout", err: fmt.Errorf("tools/call: %w", context.DeadlineExceeded), cctx: expired,
			outcome: metrics.OutcomeTimeout, code: -32001, message: "MCP tool call 'fx__echo' timed out after 2m0s"},
		{name: "rpc error", err: &upstream.RPCError{Code: -32099, Message: "bad credentials " + ghToken + " see https://h/p?token=abc"},
			outcome: metrics.OutcomeError, code: -32099, message: "bad credentials [REDACTED] see https://h/p", mustLack: ghToken},
		{name: "rpc error cut", err: &upstream.RPCError{Code: 7, Message: strings.Repeat("é", 600)},
			outcome: metrics.OutcomeError, code: 7, message: strings.Repeat("é", 499) + "…"},
		{name: "wrapped rpc error", err: fmt.Errorf("upstream fx: %w", &upstream.RPCError{Code: -32602, Message: "unknown tool: \"echo\""}),
			outcome: metrics.OutcomeError, code: -32602, message: `unknown tool: "echo"`},
		{name: "not connected", err: fmt.Errorf("tools/call: %w", upstream.ErrNotConnected),
			outcome: metrics.OutcomeError, code: -32000, message: "MCP server 'fx' is not connected"},
		{name: "connection lost", err: fmt.Errorf("tools/call: %w: read: EOF token="+ghToken, upstream.ErrConnectionLost),
			outcome: metrics.OutcomeError, code: -32000,
			message:  "MCP server 'fx' was lost during the call; it was not retried and its outcome is unknown (...",
			mustLack: ghToken},
		{name: "response too large", err: fmt.Errorf("tools/call: %w", &upstream.ResponseTooLargeError{Limit: 16078168}),
			outcome: metrics.OutcomeError, code: -32000, message: "MCP response body exceeds the 16078168-byte limit"},
		{name: "other error", err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused; Authorization: Bearer " + ghToken),
			outcome: metrics.OutcomeError, code: -32000, message: "MCP server 'fx': dial tcp 10.0.0.1:443: connect: connection refused...",
			mustLack: ghToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cctx := tt.ctx, tt.cctx
			if ctx == nil {
				ctx = bg
			}
			if cctx == nil {
				cctx = bg
			}
			outcome, werr := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected()}).calls.classify(entry, json.RawMessage(tt.result), tt.err, ctx, cctx, 2*time.Minute)
			if outcome != tt.outcome {
				t.Errorf("outcome = %q, want %q", outcome, tt.outcome)
			}
			if tt.code == 0 {
				if werr != nil {
					t.Errorf("error = %+v, want none", werr)
				}
				return
			}
			if werr == nil {
				t.Fatal("no error")
			}
			if werr.Code != tt.code {
				t.Errorf("code = %d, want %d", werr.Code, tt.code)
			}
			if prefix, ok := strings.CutSuffix(tt.message, "..."); ok {
				if !strings.HasPrefix(werr.Message, prefix) {
					t.Errorf("message = %q, want prefix %q", werr.Message, prefix)
				}
			} else if werr.Message != tt.message {
				t.Errorf("message = %q, want %q", werr.Message, tt.message)
			}
			if tt.mustLack != "" && strings.Contains(werr.Message, tt.mustLack) {
				t.Errorf("message %q leaks %q", werr.Message, tt.mustLack)
			}
		})
	}
}

func TestCallParams(t *testing.T) {
	tests := []struct {
		name       string
		tool       string
		args, meta string
		want       string
	}{
		{"arguments kept exactly", "echo", `{"n":18446744073709551615, "f":1.50e0,"s":"\u00e9"}`, ``,
			`{"name":"echo","arguments":{"n":18446744073709551615, "f":1.50e0,"s":"\u00e9"}}`},
		{"no arguments", "echo", ``, ``, `{"name":"echo"}`},
		{"null arguments", "echo", `null`, ``, `{"name":"echo"}`},
		{"meta forwarded", "echo", `{}`, `{"progressToken":"p-1","io.x/y":[1]}`,
			`{"name":"echo","arguments":{},"_meta":{"progressToken":"p-1","io.x/y":[1]}}`},
		{"empty meta dropped", "echo", `{}`, `{}`, `{"name":"echo","arguments":{}}`},
		{"null meta dropped", "echo", `{}`, `null`, `{"name":"echo","arguments":{}}`},
		{"name escaped", `we"ird\name`, `{}`, ``, `{"name":"we\"ird\\name","arguments":{}}`},
		{"hop keys dropped", "echo", ``, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1}`,
			`{"name":"echo","_meta":{"progressToken":1}}`},
		{"meta of hop keys only dropped", "echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
			`{"name":"echo","arguments":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callParams(tt.tool, json.RawMessage(tt.args), json.RawMessage(tt.meta))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("callParams = %s, want %s", got, tt.want)
			}
		})
	}
}

// The client's own _meta and argument bytes reach the upstream as sent;
// only the progress token is the proxy's.
func TestClientMetaForwarded(t *testing.T) {
	fx := echoUpstream()
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	c := startStdio(t, p)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"a":18446744073709551615},"_meta":{"progressToken":"tok","io.x/k":{"v":[1.0]}}}}`)
	c.recv(`1`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`)
	c.recv(`2`)
	reqs := fx.requests()
	want := []string{
		// The progress token is the proxy's own upstream (progress.go).
		`{"name":"echo","arguments":{"a":18446744073709551615},"_meta":{"progressToken":"px-progress-N","io.x/k":{"v":[1.0]}}}`,
		`{"name":"echo","arguments":{}}`,
	}
	if len(reqs) != len(want) {
		t.Fatalf("upstream got %d requests, want %d", len(reqs), len(want))
	}
	for i := range want {
		if progressTokens.ReplaceAllString(reqs[i].Params, "px-progress-N") != want[i] {
			t.Errorf("request %d params = %s\nwant %s", i, reqs[i].Params, want[i])
		}
	}
}

func callError(t *testing.T, err error) *wireError {
	t.Helper()
	var werr *wireError
	if !errors.As(err, &werr) {
		t.Fatalf("error %v (%T) is not a wire error", err, err)
	}
	return werr
}

func TestCallToolErrors(t *testing.T) {
	const yaml = `
blobs: {mode: passthrough}
servers:
  fx:
    command: fixture
    timeout: 200ms
`
	t.Run("timeout", func(t *testing.T) {
		fx := connected(echoTool)
		fx.RequestFn = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, fmt.Errorf("tools/call: %w", ctx.Err())
		}
		p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": fx})
		_, err := p.CallTool(context.Background(), "", nil, "fx__echo", json.RawMessage(`{}`))
		werr := callError(t, err)
		if werr.Code != -32001 || werr.Message != "MCP tool call 'fx__echo' timed out after 200ms" {
			t.Errorf("timeout error = %+v", werr)
		}
	})
	t.Run("canceled by the client", func(t *testing.T) {
		fx := connected(echoTool)
		ctx, cancel := context.WithCancel(context.Background())
		fx.RequestFn = func(rctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
			cancel()
			<-rctx.Done()
			return nil, rctx.Err()
		}
		p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": fx})
		_, err := p.CallTool(ctx, "", nil, "fx__echo", json.RawMessage(`{}`))
		if werr := callError(t, err); werr.Code != -32000 || werr.Message != "request cancelled" {
			t.Errorf("cancel error = %+v", werr)
		}
	})
	t.Run("rpc error", func(t *testing.T) {
		fx := connected(echoTool)
		fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return nil, &upstream.RPCError{Code: -32099, Message: "token " + ghToken + " rejected", Data: json.RawMessage(`{"n":1}`)}
		}
		p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": fx})
		_, err := p.CallTool(context.Background(), "", nil, "fx__echo", json.RawMessage(`{}`))
		if werr := callError(t, err); werr.Code != -32099 || werr.Message != "token [REDACTED] rejected" {
			t.Errorf("rpc error = %+v", werr)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": connected(echoTool)})
		_, err := p.CallTool(context.Background(), "", nil, "nope\x1b[31m", json.RawMessage(`{}`))
		if werr := callError(t, err); werr.Code != -32602 || werr.Message != "unknown tool: nope" {
			t.Errorf("unknown tool error = %+v", werr)
		}
	})
	t.Run("not connected", func(t *testing.T) {
		fx := &fakeUpstream{}
		fx.set(upstream.StateConnected, echoTool)
		p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": fx})
		fx.set(upstream.StateFailed)
		_, err := p.CallTool(context.Background(), "", nil, "fx__echo", json.RawMessage(`{}`))
		if werr := callError(t, err); werr.Code != -32000 || werr.Message != "MCP server 'fx' is not connected" {
			t.Errorf("not connected error = %+v", werr)
		}
		if len(fx.requests()) != 0 {
			t.Error("a call to a server that is not connected was sent")
		}
	})
	t.Run("result rewritten", func(t *testing.T) {
		fx := connected(echoTool)
		fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage("{\n  \"content\": [{\"type\": \"text\", \"text\": \"x\\uDB40\\uDC41y\"}],\n  \"isError\": true\n}"), nil
		}
		p := newProxy(t, yaml, map[string]*fakeUpstream{"fx": fx})
		got, err := p.CallTool(context.Background(), "", nil, "fx__echo", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"content":[{"type":"text","text":"xy"}],"isError":true}`; string(got) != want {
			t.Errorf("result = %s, want %s", got, want)
		}
		if !IsErrorResult(got) {
			t.Error("IsErrorResult = false")
		}
	})
}

func TestIsErrorResult(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"isError":true}`:              true,
		`{"content":[],"isError":true}`: true,
		`{"isError":false}`:             false,
		`{"isError":"true"}`:            false,
		`{"content":[]}`:                false,
		`not json`:                      false,
	} {
		if got := IsErrorResult(json.RawMessage(raw)); got != want {
			t.Errorf("IsErrorResult(%s) = %v, want %v", raw, got, want)
		}
	}
}

// progressTokens matches the proxy's own upstream progress tokens, which
// are random.
var progressTokens = regexp.MustCompile(`px-progress-[0-9a-f]+`)
