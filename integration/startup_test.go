package integration

import (
	"cmp"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// slowInit is how long the slow fixture takes to answer initialize; with
// the short startup_wait it takes slowInitShort, which leaves a wide margin
// between the 200ms wait and the slow server's arrival on a busy machine.
const (
	slowInit      = "1500ms"
	slowInitShort = "3s"
)

// connectFor connects the go-sdk client to the proxy over tr, offering
// protocol version proto ("" for the SDK's latest).
func connectFor(t *testing.T, tr, cfg string, opts *mcp.ClientOptions, proto string) *mcp.ClientSession {
	t.Helper()
	var sopts *mcp.ClientSessionOptions
	if proto != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: proto}
	}
	var cs *mcp.ClientSession
	if tr == "stdio" {
		cs, _ = sdkStdioProxy(t, cfg, opts, sopts)
	} else {
		url, _ := startHTTPProxy(t, cfg)
		cs = sdkHTTP(t, url, opts, sopts)
	}
	if got := cs.InitializeResult().ProtocolVersion; proto != "" && got != proto {
		t.Fatalf("negotiated protocol %s, want %s", got, proto)
	}
	return cs
}

// TestStartupWait: a session's first tools/list waits for slow upstreams
// (startup_wait, default 10s); with a short startup_wait it does not, and the
// slow server's tools arrive later with notifications/tools/list_changed
// (for a 2025-11-25 client on the session's streams, for the SDK's default
// 2026-07-28 through subscriptions/listen).
func TestStartupWait(t *testing.T) {
	t.Parallel()
	servers := func(delay string) []string {
		return []string{
			fixtureServer("fast", []string{"-no-weird"}),
			fixtureServer("slow", []string{"-no-weird", "-init-delay", delay}),
		}
	}
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr+"/default wait", func(t *testing.T) {
			t.Parallel()
			cs := connectFor(t, tr, writeConfig(t, "", servers(slowInit)...), nil, "")
			names := toolNames(listTools(t, cs))
			if !hasName(names, "slow__echo") || !hasName(names, "fast__echo") {
				t.Errorf("the first tools/list lacks slow__echo or fast__echo: %v", names)
			}
		})
		t.Run(tr+"/call before list", func(t *testing.T) {
			t.Parallel()
			// A host that remembers a tool calls it at once, before any
			// tools/list and before its server has connected: the call
			// waits for the server instead of failing as unknown.
			cs := connectFor(t, tr, writeConfig(t, "", servers(slowInit)...), nil, "")
			if got := contentText(callTool(t, cs, "slow__echo", map[string]any{"text": "early"})); got != "early" {
				t.Errorf("slow__echo: %q", got)
			}
		})
		for _, proto := range []string{"2025-11-25", ""} {
			t.Run(tr+"/short wait/"+cmp.Or(proto, "sdk default"), func(t *testing.T) {
				t.Parallel()
				changed := make(chan struct{}, 64)
				opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case changed <- struct{}{}:
					default:
					}
				}}
				cs := connectFor(t, tr, writeConfig(t, "startup_wait: 200ms\n", servers(slowInitShort)...), opts, proto)
				// (fast's tools are not required here: on a busy machine even
				// the fast fixture may need more than 200ms.)
				names := toolNames(listTools(t, cs))
				if hasName(names, "slow__echo") {
					t.Fatalf("the first tools/list already has slow__echo (init delay %s, startup_wait 200ms): %v", slowInitShort, names)
				}
				deadline := time.After(15 * time.Second)
				for notified := 0; ; {
					select {
					case <-changed:
						notified++
					case <-deadline:
						t.Fatalf("slow__echo and fast__echo are not both listed after %d list_changed notifications: %v", notified, names)
					}
					names = toolNames(listTools(t, cs))
					if hasName(names, "slow__echo") && hasName(names, "fast__echo") {
						if got := contentText(callTool(t, cs, "slow__echo", map[string]any{"text": "late"})); got != "late" {
							t.Errorf("slow__echo: %q", got)
						}
						return
					}
				}
			})
		}
	}
}

// TestFirstConnectionWait: requests routed to one server that is still
// making its first connection wait for it, as the first tools/list does
// (issue 12 item 15): a resources/read of a URI the host already knows and
// a prompts/get right after initialize are answered once the server is up.
// With a startup_wait shorter than the server's start, the read fails
// after about startup_wait, saying the server is still connecting.
func TestFirstConnectionWait(t *testing.T) {
	t.Parallel()
	const uri = "slow+fixture://text/hello.txt"
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			began := time.Now() // before the proxy, and so the server, starts
			cs := connectFor(t, tr, writeConfig(t, "", fixtureServer("slow", []string{"-no-weird", "-init-delay", "4s"})), nil, "2025-11-25")
			read := func() {
				res, err := cs.ReadResource(testCtx(t, callTimeout), &mcp.ReadResourceParams{URI: uri})
				if err != nil || len(res.Contents) != 1 || res.Contents[0].Text == "" {
					t.Errorf("resources/read %s: %v %s", uri, err, rsJSON(res))
				}
			}
			prompt := func() {
				pr, err := cs.GetPrompt(testCtx(t, callTimeout), &mcp.GetPromptParams{Name: "slow__greet", Arguments: map[string]string{"who": "early"}})
				if err != nil || len(pr.Messages) == 0 {
					t.Errorf("prompts/get slow__greet: %v %s", err, rsJSON(pr))
				}
			}
			// Each comes first on one transport; the first waits for the
			// server, which is still starting (it answers 4 s after it was
			// started, however long connecting the client took). A proxy
			// that did not wait would answer it with an error at once.
			first, second := read, prompt
			if tr == "http" {
				first, second = prompt, read
			}
			first()
			if took := time.Since(began); took < 4*time.Second {
				t.Errorf("the first request was answered %s after the proxy was started: the server takes 4 s to start, so it did not wait for it", took)
			}
			second()
		})
	}
	t.Run("past startup_wait", func(t *testing.T) {
		t.Parallel()
		cfg := writeConfig(t, "startup_wait: 500ms\n", fixtureServer("slow", []string{"-no-weird", "-init-delay", slowInitShort}))
		cs := connectFor(t, "stdio", cfg, nil, "2025-11-25")
		began := time.Now()
		_, err := cs.ReadResource(testCtx(t, callTimeout), &mcp.ReadResourceParams{URI: uri})
		took := time.Since(began)
		w := rsRPCError(err)
		if w == nil || w.Code != -32000 || !strings.HasPrefix(w.Message, "MCP server 'slow' is not connected (connecting)") {
			t.Fatalf("resources/read past startup_wait: %v, want -32000 MCP server 'slow' is not connected (connecting)", err)
		}
		if took > 3*time.Second {
			t.Errorf("refused after %s, want about the 500ms startup_wait (the server takes %s)", took, slowInitShort)
		}
	})
}
