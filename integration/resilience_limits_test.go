package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResilienceMaxResponseBytes: with max_response_bytes: 100000, a result
// one byte over fails with the documented error, on a stdio upstream and on
// Streamable HTTP upstreams (JSON and event-stream answers); a result at the
// limit passes, the proxy stays up and the same connection answers the next
// call. A message that is not JSON before the answer (bad_json) is
// dropped: the call gets its result.
func TestResilienceMaxResponseBytes(t *testing.T) {
	t.Parallel()
	const limit = "max_response_bytes: 100000"
	cfg := writeConfig(t, "",
		fixtureServer("sbig", []string{"-no-weird"}, limit),
		httpServer("hbig", startFixtureHTTP(t, "-no-weird"), limit),
		httpServer("hsse", startFixtureHTTP(t, "-no-weird", "-sse-responses"), limit),
	)
	cs, _, _ := sdkStdioProxyCmd(t, cfg, nil, nil)
	rsWaitListed(t, cs, callTimeout, "sbig__big", "hbig__big", "hsse__big")
	// The limit counts one stdio line or HTTP body, but one whole SSE event
	// (its "event:" and "data: " framing included, docs/configuration.md#servers "per event"),
	// so on hsse a message of exactly 100000 bytes is over it.
	for server, fits := range map[string]int{"sbig": 100000, "hbig": 100000, "hsse": 99900} {
		t.Run(server, func(t *testing.T) {
			big := server + "__big"
			_, err := rsCall(cs, big, map[string]any{"bytes": 100001}, callTimeout)
			werr := rsRPCError(err)
			if want := "MCP response body exceeds the 100000-byte limit"; werr == nil || werr.Message != want {
				t.Errorf("%s with 100001 bytes: %v, want the JSON-RPC error %q", big, err, want)
			} else {
				t.Logf("%s 100001 bytes: %d %s", big, werr.Code, werr.Message)
			}
			res, err := rsCall(cs, big, map[string]any{"bytes": fits}, callTimeout)
			if err != nil || res.IsError || len(contentText(res)) < fits-200 {
				t.Errorf("%s with a %d-byte message (within the limit): err %v", big, fits, err)
			}
			if got := contentText(callTool(t, cs, server+"__echo", map[string]any{"text": "after big"})); got != "after big" {
				t.Errorf("%s__echo after the oversized answer: %q", server, got)
			}

			// The line that is not JSON is dropped and the call is answered.
			res, err = rsCall(cs, server+"__bad_json", map[string]any{}, 15*time.Second)
			if err != nil || res.IsError || contentText(res) != "after bad json" {
				t.Errorf("%s__bad_json: err %v result %s, want the result \"after bad json\"", server, err, rsJSON(res))
			}
			if got := contentText(callTool(t, cs, server+"__echo", map[string]any{"text": "after bad"})); got != "after bad" {
				t.Errorf("%s__echo after bad_json: %q", server, got)
			}
		})
	}
}

// TestResilienceListChanged: an upstream's notifications/tools/list_changed
// reaches a go-sdk client as its own list_changed, and the new tool is listed
// and callable; toggled off, it leaves the list again. Over stdio and HTTP,
// with the SDK's default protocol.
func TestResilienceListChanged(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "", fixtureServer("fx", []string{"-no-weird"}))
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			changed := make(chan struct{}, 64)
			opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case changed <- struct{}{}:
				default:
				}
			}}
			var cs *mcp.ClientSession
			if tr == "stdio" {
				cs, _, _ = sdkStdioProxyCmd(t, cfg, opts, nil)
			} else {
				url, _ := startHTTPProxy(t, cfg)
				cs = sdkHTTP(t, url, opts, nil)
			}
			names := rsWaitListed(t, cs, callTimeout, "fx__list_changed")
			if hasName(names, "fx__extra_tool") {
				t.Fatalf("fx__extra_tool is listed before list_changed was called: %v", names)
			}
			for len(changed) > 0 { // notifications of the start-up, if any
				<-changed
			}
			for _, step := range []struct {
				text   string
				listed bool
			}{{"extra_tool added", true}, {"extra_tool removed", false}} {
				if got := contentText(callTool(t, cs, "fx__list_changed", map[string]any{})); got != step.text {
					t.Fatalf("fx__list_changed: %q, want %q", got, step.text)
				}
				deadline := time.After(15 * time.Second)
				for {
					select {
					case <-changed:
					case <-deadline:
						t.Fatalf("after %q: no notifications/tools/list_changed with the list right within 15s (listed: %v)", step.text, names)
					}
					names = toolNames(listTools(t, cs))
					if hasName(names, "fx__extra_tool") == step.listed {
						break
					}
				}
				if step.listed {
					if got := contentText(callTool(t, cs, "fx__extra_tool", map[string]any{})); got != "extra_tool ok" {
						t.Errorf("fx__extra_tool: %q", got)
					}
				}
			}
			if !strings.Contains(strings.Join(names, ","), "fx__echo") {
				t.Errorf("fx__echo left the list: %v", names)
			}
		})
	}
}
