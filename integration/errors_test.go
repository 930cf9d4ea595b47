package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// onceThenFailing is a stdio server command that runs the fixture the first
// time and exits at start on every later run, so that a server that crashed
// stays down: the proxy's reconnect attempts fail.
func onceThenFailing(t testing.TB, fixtureArgs ...string) (string, []string) {
	marker := filepath.Join(t.TempDir(), "started-once")
	script := fmt.Sprintf(`if [ -e %[1]s ]; then exec %[2]s -exit-at-start; fi; : > %[1]s; exec %[2]s %[3]s`,
		shellQuote(marker), shellQuote(fixtureBin), strings.Join(fixtureArgs, " "))
	return "/bin/sh", []string{"-c", script}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestErrors: what a client sees when things go wrong, over stdio and
// Streamable HTTP: an unknown tool, a call that times out (and the proxy
// still answers afterwards), an upstream JSON-RPC error, and an upstream that
// crashes mid-call (an error at once, then "not connected", while another
// server keeps working).
func TestErrors(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			crashCmd, crashArgs := onceThenFailing(t, "-no-weird")
			fx, fxRecord := recordedFixture(t, "fx", []string{"-no-weird"}, "timeout: 1s")
			cfg := writeConfig(t, "",
				fx,
				fixtureServer("other", []string{"-no-weird"}),
				stdioServer("crashy", crashCmd, crashArgs),
			)
			cs := connectFor(t, tr, cfg, nil, "")
			names := toolNames(listTools(t, cs))
			for _, n := range []string{"fx__hang", "other__echo", "crashy__crash"} {
				if !hasName(names, n) {
					t.Fatalf("tools/list lacks %s: %v", n, names)
				}
			}

			t.Run("unknown tool", func(t *testing.T) {
				werr, _ := callErr(t, cs, "nosuch__tool", map[string]any{}, callTimeout)
				if werr.Code != -32602 || werr.Message != "unknown tool: nosuch__tool" {
					t.Errorf("unknown tool: code %d message %q, want -32602 %q", werr.Code, werr.Message, "unknown tool: nosuch__tool")
				}
			})

			t.Run("timeout", func(t *testing.T) {
				werr, took := callErr(t, cs, "fx__hang", map[string]any{}, callTimeout)
				want := "MCP tool call 'fx__hang' timed out after 1s"
				if werr.Code != -32001 || werr.Message != want {
					t.Errorf("hang: code %d message %q, want -32001 %q", werr.Code, werr.Message, want)
				}
				if took < 900*time.Millisecond || took > 5*time.Second {
					t.Errorf("the timeout error came after %s, want about 1s (timeout: 1s)", took)
				}
				// The proxy and that server still answer.
				if got := contentText(callTool(t, cs, "fx__echo", map[string]any{"text": "after timeout"})); got != "after timeout" {
					t.Errorf("fx__echo after the timeout: %q", got)
				}
				// The upstream was told to stop working on the call (the MCP
				// spec: a sender that times out a request SHOULD cancel it).
				waitRecord(t, fxRecord, `"cancelled":`, `"tool":"hang"`, `"inflight":true`)
			})

			t.Run("upstream rpc error", func(t *testing.T) {
				werr, _ := callErr(t, cs, "fx__rpc_error", map[string]any{}, callTimeout)
				if werr.Code != -32099 || werr.Message != "fixture rpc_error: requested error" {
					t.Errorf("rpc_error: code %d message %q, want the upstream's -32099 %q", werr.Code, werr.Message, "fixture rpc_error: requested error")
				}
				// The error's data is the upstream's too: clients act on it
				// (e.g. -32042 URL elicitation carries its elicitations there).
				var data struct {
					Tool      string          `json:"tool"`
					Retryable *bool           `json:"retryable"`
					N         json.RawMessage `json:"n"`
				}
				if len(werr.Data) == 0 || json.Unmarshal(werr.Data, &data) != nil ||
					data.Tool != "rpc_error" || data.Retryable == nil || *data.Retryable || len(data.N) == 0 {
					t.Errorf("rpc_error: error data %s, want the upstream's {\"tool\":\"rpc_error\",\"retryable\":false,\"n\":12345678901234567890}", werr.Data)
				}
			})

			t.Run("crash mid-call", func(t *testing.T) {
				werr, took := callErr(t, cs, "crashy__crash", map[string]any{}, callTimeout)
				t.Logf("crash mid-call after %s: %d %s", took.Round(time.Millisecond), werr.Code, werr.Message)
				// At once, not at fx's or the call's timeout; the bound leaves
				// room for a loaded machine.
				if took > 5*time.Second {
					t.Errorf("the crash was reported after %s, want at once (under 5s)", took)
				}
				if werr.Code == -32001 || !strings.Contains(werr.Message, "crashy") {
					t.Errorf("crash: code %d message %q, want an error naming the server (not a timeout)", werr.Code, werr.Message)
				}
				// crashy crash-loops (-exit-at-start): the call waits out
				// reconnect_wait (5s), then fails saying why, never sent.
				werr, took = callErr(t, cs, "crashy__echo", map[string]any{"text": "x"}, callTimeout)
				for _, want := range []string{"MCP server 'crashy' is not connected", "exit requested by -exit-at-start", "was not sent"} {
					if werr.Code != -32000 || !strings.Contains(werr.Message, want) {
						t.Errorf("call after the crash: code %d message %q, want -32000 with %q", werr.Code, werr.Message, want)
					}
				}
				if took > 5*time.Second+2*time.Second {
					t.Errorf("the call after the crash failed after %s, want within reconnect_wait (5s)", took)
				}
				if got := contentText(callTool(t, cs, "other__echo", map[string]any{"text": "still here"})); got != "still here" {
					t.Errorf("other__echo after crashy died: %q", got)
				}
				// The dead server's tools leave the list; the others stay.
				deadline := time.Now().Add(10 * time.Second)
				for {
					names := toolNames(listTools(t, cs))
					gone := true
					for _, n := range names {
						if strings.HasPrefix(n, "crashy__") {
							gone = false
						}
					}
					if gone {
						if !hasName(names, "other__echo") || !hasName(names, "fx__echo") {
							t.Errorf("after crashy died, tools/list lost the other servers' tools: %v", names)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("crashy's tools are still listed 10s after it died: %v", names)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		})
	}
}

// waitRecord waits (bounded) for a line of a fixture's record file that
// holds every part.
func waitRecord(t testing.TB, record string, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range recorded(t, record) {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("the fixture recorded no line with %q; its record:\n%s", parts, strings.Join(recorded(t, record), "\n"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConcurrentCalls: calls from one client run side by side through the
// proxy (a slow call does not hold up the others), over stdio and HTTP.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	const calls, sleepMS = 16, 700
	cfg := writeConfig(t, "", fixtureServer("fx", []string{"-no-weird"}))
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			cs := connectFor(t, tr, cfg, nil, "")
			listTools(t, cs)
			start := time.Now()
			errs := make(chan error, calls)
			for i := range calls {
				go func() {
					ctx := testCtx(t, callTimeout)
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__sleep", Arguments: map[string]any{"ms": sleepMS}})
					if err == nil && (res.IsError || contentText(res) != "slept") {
						err = fmt.Errorf("call %d: %s", i, jsonOf(t, res))
					}
					errs <- err
				}()
			}
			for range calls {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			// One after another they would take 16 × 0.7 s = 11.2 s.
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("%d concurrent %dms calls took %s: they did not run side by side", calls, sleepMS, took)
			}
		})
	}
}
