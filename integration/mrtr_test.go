package integration

import (
	"cmp"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMultiRoundTripAcrossEras: the official Go SDK's everything-server
// speaking 2026-07-28 behind the proxy over stdio, and the official Go SDK
// as the client over stdio and Streamable HTTP, at 2025-11-25 (the proxy
// asks the client each input request as a request of its own) and at the
// SDK's default, 2026-07-28 (the proxy passes the server's input requests
// through, round after round, with its sealed states): a tool that asks for
// elicitation, sampling and roots in one round, and one that asks in two
// rounds, complete with the client's answers.
func TestMultiRoundTripAcrossEras(t *testing.T) {
	t.Parallel()
	bin := everythingGoBin(t)
	cfg := writeConfig(t, "", stdioServer("ev", bin, nil, "protocol: 2026-07-28"))
	for _, tr := range []string{"stdio", "http"} {
		for _, proto := range []string{"2025-11-25", ""} {
			t.Run(tr+"/"+cmp.Or(proto, "sdk default"), func(t *testing.T) {
				t.Parallel()
				var elicited atomic.Int32
				cs := sfConnect(t, tr, cfg, &mcp.ClientOptions{
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						elicited.Add(1)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "color": "teal"}}, nil
					},
					CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
						return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "Hello"}}, nil
					},
				}, &mcp.ClientSessionOptions{ProtocolVersion: proto}).cs
				if res := sfCall(t, cs, "ev__test_input_required_result_multiple_inputs", map[string]any{}); res.IsError ||
					!strings.HasPrefix(contentText(res), "Hello Ada — ") {
					t.Errorf("elicitation, sampling and roots in one round: isError %v %q", res.IsError, contentText(res))
				}
				if res := sfCall(t, cs, "ev__test_input_required_result_multi_round", map[string]any{}); res.IsError ||
					contentText(res) != "Multi-round complete: Ada likes teal" {
					t.Errorf("two rounds: isError %v %q", res.IsError, contentText(res))
				}
				if n := elicited.Load(); n != 3 {
					t.Errorf("the client was asked %d elicitations, want 3", n)
				}
			})
		}
	}
}
