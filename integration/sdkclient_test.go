package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The official Go SDK as the MCP client a user would point at the proxy.

var sdkImpl = &mcp.Implementation{Name: "mcp-proxy-integration", Version: "1.0.0"}

// sdkStdioProxy starts `mcp-proxy serve --config cfg` as the go-sdk client's
// stdio server and returns the initialized session. opts may be nil.
func sdkStdioProxy(t testing.TB, cfg string, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cs, _, stderr := sdkStdioProxyCmd(t, cfg, opts, sopts)
	return cs, stderr
}

// sdkStdioProxyCmd is sdkStdioProxy with extra proxy arguments that also
// returns the command (for the proxy's pid).
func sdkStdioProxyCmd(t testing.TB, cfg string, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions, extra ...string) (*mcp.ClientSession, *exec.Cmd, *syncBuffer) {
	t.Helper()
	stderr := &syncBuffer{}
	cmd := proxyCmd(append([]string{"serve", "--config", cfg}, extra...)...)
	cmd.Stderr = stderr
	cmd.WaitDelay = exitTimeout // bounds Wait if a grandchild kept stderr open
	ctx := testCtx(t, startTimeout)
	cs, err := mcp.NewClient(sdkImpl, opts).Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: exitTimeout}, sopts)
	if err != nil {
		t.Fatalf("go-sdk: connect to the stdio proxy: %v\nstderr:\n%s", err, tail(stderr.String(), 4000))
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("closing the stdio proxy session: %v", err)
		}
		if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
			t.Errorf("the stdio proxy exited with %v after stdin closed", cmd.ProcessState)
		}
		if race := testproc.RaceReport(stderr.String()); race != "" {
			t.Errorf("the stdio proxy reported a data race:\n%s", race)
		}
		if t.Failed() {
			t.Logf("stdio proxy stderr (tail):\n%s", tail(stderr.String(), 6000))
		}
	})
	return cs, cmd, stderr
}

// sdkHTTP connects the go-sdk client to a Streamable HTTP endpoint.
func sdkHTTP(t testing.TB, url string, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	ctx := testCtx(t, startTimeout)
	cs, err := mcp.NewClient(sdkImpl, opts).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, sopts)
	if err != nil {
		t.Fatalf("go-sdk: connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// directOpts makes a go-sdk client look like the proxy does to an upstream:
// the client capabilities the proxy declares upstream (server-everything
// registers some tools only for clients with sampling, elicitation or
// roots), protocol 2025-11-25.
func directOpts(t testing.TB) (*mcp.ClientOptions, *mcp.ClientSessionOptions) {
	t.Helper()
	return &mcp.ClientOptions{Capabilities: proxyUpstreamCaps(t)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
}

// upstreamCaps caches what the proxy declares in its upstream initialize.
var upstreamCaps struct {
	once sync.Once
	caps *mcp.ClientCapabilities
	err  error
}

// proxyUpstreamCaps returns the client capabilities the proxy declares to
// its upstreams, read off the wire: `mcp-proxy tools` runs once against a
// fixture whose stdin is copied to a file by tee.
func proxyUpstreamCaps(t testing.TB) *mcp.ClientCapabilities {
	t.Helper()
	u := &upstreamCaps
	u.once.Do(func() { u.caps, u.err = captureUpstreamCaps() })
	if u.err != nil {
		t.Fatalf("reading the capabilities the proxy declares upstream: %v", u.err)
	}
	clone := *u.caps
	return &clone
}

func captureUpstreamCaps() (*mcp.ClientCapabilities, error) {
	dir, err := os.MkdirTemp(binDir, "caps-")
	if err != nil {
		return nil, err
	}
	capture := filepath.Join(dir, "initialize.jsonl")
	script := "tee " + shellQuote(capture) + " | " + shellQuote(fixtureBin) + " -no-weird"
	cfg := filepath.Join(dir, "mcp-proxy.yaml")
	yaml := "servers:\n" + stdioServer("tee", "/bin/sh", []string{"-c", script})
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, proxyBin, "tools", "--json", "--config", cfg)
	cmd.Env = proxyEnv()
	cmd.WaitDelay = exitTimeout
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mcp-proxy tools: %w\n%s", err, tail(string(out), 3000))
	}
	data, err := os.ReadFile(capture)
	if err != nil {
		return nil, err
	}
	// With protocol auto the proxy asks server/discover first, which the
	// fixture refuses: initialize follows.
	var req struct {
		Method string `json:"method"`
		Params struct {
			Capabilities json.RawMessage `json:"capabilities"`
		} `json:"params"`
	}
	found := false
	for line := range strings.SplitSeq(string(data), "\n") {
		if json.Unmarshal([]byte(line), &req) == nil && req.Method == "initialize" {
			found = true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("the proxy sent no initialize upstream: %q", tail(string(data), 2000))
	}
	caps := &mcp.ClientCapabilities{}
	if len(req.Params.Capabilities) > 0 {
		if err := json.Unmarshal(req.Params.Capabilities, caps); err != nil {
			return nil, fmt.Errorf("capabilities %s: %w", req.Params.Capabilities, err)
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(req.Params.Capabilities, &keys)
		if _, ok := keys["roots"]; ok {
			// go-sdk reads roots from RootsV2 only.
			caps.RootsV2 = &mcp.RootCapabilities{ListChanged: caps.Roots.ListChanged}
		}
	}
	return caps, nil
}

// sdkDirectStdio connects the go-sdk client straight to a stdio upstream.
func sdkDirectStdio(t testing.TB, command string, args ...string) *mcp.ClientSession {
	t.Helper()
	opts, sopts := directOpts(t)
	ctx := testCtx(t, startTimeout)
	cs, err := mcp.NewClient(sdkImpl, opts).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(command, args...)}, sopts)
	if err != nil {
		t.Fatalf("go-sdk: connect to %s %v: %v", command, args, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listTools reads every page of tools/list.
func listTools(t testing.TB, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	ctx := testCtx(t, callTimeout)
	var tools []*mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools = append(tools, tool)
	}
	return tools
}

// toolNames returns the sorted names of tools.
func toolNames(tools []*mcp.Tool) []string {
	names := make([]string, len(tools))
	for i, tool := range tools {
		names[i] = tool.Name
	}
	sort.Strings(names)
	return names
}

// hasName reports whether names holds name.
func hasName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// callTool calls a tool that must succeed (no JSON-RPC error, no isError).
func callTool(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx := testCtx(t, callTimeout)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("call %s: isError result: %s", name, contentText(res))
	}
	return res
}

// callErr calls a tool that must fail with a JSON-RPC error, and returns it
// with the time the call took.
func callErr(t testing.TB, cs *mcp.ClientSession, name string, args any, bound time.Duration) (*jsonrpc.Error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	took := time.Since(start)
	if err == nil {
		b, _ := json.Marshal(res)
		t.Fatalf("call %s: want a JSON-RPC error, got the result %s", name, b)
	}
	if ctx.Err() != nil {
		t.Fatalf("call %s: no answer within %s (%v)", name, bound, err)
	}
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("call %s: want a JSON-RPC error, got %T %v", name, err, err)
	}
	return werr, took
}

// contentText joins the text of a result's text items.
func contentText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured returns a result's structuredContent as JSON.
func structured(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
