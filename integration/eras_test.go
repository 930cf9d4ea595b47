package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Both protocol eras, both ways: a real upstream of each era behind the
// proxy over each transport, reached by a client of each era, with the
// upstream's requests for elicitation, sampling and roots answered by the
// client across eras, and a resource subscription updated across eras.

// everythingGoPkg is the official Go SDK's conformance server (the go-sdk
// version of go.mod), which serves both eras: its input-required tools
// return input_required results to a 2026-07-28 client and ask a
// 2025-11-25 client with requests of their own.
const everythingGoPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// everythingGo is the built everything-server, shared by the package.
var everythingGo struct {
	once sync.Once
	bin  string
	err  error
}

// everythingGoBin builds everything-server on first use.
func everythingGoBin(t testing.TB) string {
	t.Helper()
	everythingGo.once.Do(func() {
		root, err := testproc.ModuleRoot("..")
		if err != nil {
			everythingGo.err = err
			return
		}
		everythingGo.bin = filepath.Join(binDir, "everything-server")
		everythingGo.err = testproc.Build(root, everythingGo.bin, everythingGoPkg, false, buildTimeout)
	})
	if everythingGo.err != nil {
		t.Fatal(everythingGo.err)
	}
	return everythingGo.bin
}

// startEverythingGoHTTP runs everything-server over Streamable HTTP until the
// test ends, stateless (it then speaks 2026-07-28) or with sessions (which a
// 2025-11-25 server needs for its requests to the client), and returns its
// URL.
func startEverythingGoHTTP(t testing.TB, stateless bool) string {
	t.Helper()
	bin := everythingGoBin(t)
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		cmd := exec.Command(bin, "-http="+addr, "-stateless="+strconv.FormatBool(stateless))
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		p := startProc(t, "everything-server (http)", cmd, nil)
		deadline := time.Now().Add(startTimeout)
		for time.Now().Before(deadline) {
			if c, err := net.Dial("tcp", addr); err == nil {
				_ = c.Close()
				return "http://" + addr + "/"
			}
			select {
			case <-p.done: // the port was taken in between: another one
			case <-time.After(20 * time.Millisecond):
				continue
			}
			break
		}
	}
	t.Fatal("everything-server did not listen on any of 3 ports")
	return ""
}

// eraUpstream is one upstream of the matrix.
type eraUpstream struct {
	name string
	// protocol is the proxy's protocol setting for it: the era it is spoken to in.
	protocol string
	// server returns the YAML of the server `up` (started if need be).
	server func(t testing.TB) string
	// The tools that ask the client for elicitation, sampling and roots.
	elicit, sample, roots string
	// sampleArgs are the sampling tool's arguments (none when nil).
	sampleArgs map[string]any
	// watched is the resource whose updates the test waits for; startUpdates,
	// if not "", is the tool that starts them.
	watched, startUpdates string
	// rootsWant is what the roots tool's result holds for the client's root.
	rootsWant string
	// rootsOutside: the server asks roots/list outside any call (when it
	// connects, and on the client's roots/list_changed) and its roots tool
	// shows what it last got. Such a request reaches the proxy's stdio
	// client; for an HTTP client the proxy answers with the server's
	// configured roots (docs/protocol.md#requests-from-servers), so the
	// roots tool is called only by stdio clients, again until its result
	// holds rootsWant (the fetch follows the client's connection).
	rootsOutside bool
	// capsTool, if not "", is a tool that runs only for a client that
	// declared sampling (the upstream reads the capabilities of the client
	// the proxy calls it for); its result then holds "tool executed".
	capsTool string
}

// eraRoot is the client's root, which the upstream asks for.
const eraRoot = "file:///eras/client-root"

// eraUpstreams are the upstreams: everything-server of go-sdk in each era
// over stdio and Streamable HTTP, and server-everything (TypeScript SDK,
// 2025-11-25 only) over legacy SSE, which the 2026-07-28 era does not have.
var eraUpstreams = []eraUpstream{
	goUpstream("stdio", "2025-11-25"),
	goUpstream("stdio", "2026-07-28"),
	goUpstream("http", "2025-11-25"),
	goUpstream("http", "2026-07-28"),
	{
		name: "sse/2025-11-25", protocol: "2025-11-25",
		server: func(t testing.TB) string {
			return httpServer("up", everythingSSE(t), "transport: sse", `protocol: "2025-11-25"`, `prefix: ""`)
		},
		elicit: "trigger-elicitation-request", sample: "trigger-sampling-request", roots: "get-roots-list",
		sampleArgs: map[string]any{"prompt": "What is the capital of France?", "maxTokens": 50},
		watched:    "demo://resource/static/document/architecture.md", startUpdates: "toggle-subscriber-updates",
		rootsWant: eraRoot, rootsOutside: true,
	},
}

// goUpstream is everything-server over transport, spoken to at protocol
// (over HTTP it serves 2026-07-28 stateless, and 2025-11-25 with sessions).
func goUpstream(transport, protocol string) eraUpstream {
	return eraUpstream{
		name: transport + "/" + protocol, protocol: protocol,
		server: func(t testing.TB) string {
			extra := []string{"protocol: " + q(protocol), `prefix: ""`}
			if transport == "stdio" {
				return stdioServer("up", everythingGoBin(t), nil, extra...)
			}
			return httpServer("up", startEverythingGoHTTP(t, protocol == "2026-07-28"), extra...)
		},
		elicit: "test_input_required_result_elicitation", sample: "test_input_required_result_sampling",
		roots: "test_input_required_result_list_roots", watched: "test://watched-resource",
		rootsWant: "Client exposed 1 root(s): " + eraRoot, capsTool: "test_missing_capability",
	}
}

// eraClient is one client of the matrix.
type eraClient struct {
	name string
	sdk  string // go (the official Go SDK) or ts (the official TypeScript SDK, 2025-11-25 only)
	// version is the protocol version the client asks for first (go-sdk
	// falls back from 2026-07-28 to initialize when it has to).
	version   string
	transport string // how it reaches the proxy: stdio or http
}

var eraClients = []eraClient{
	{"go-sdk/2025-11-25/stdio", "go", "2025-11-25", "stdio"},
	{"go-sdk/2025-11-25/http", "go", "2025-11-25", "http"},
	{"go-sdk/2026-07-28/stdio", "go", "2026-07-28", "stdio"},
	{"go-sdk/2026-07-28/http", "go", "2026-07-28", "http"},
	{"ts-sdk/2025-11-25/stdio", "ts", "2025-11-25", "stdio"},
	{"ts-sdk/2025-11-25/http", "ts", "2025-11-25", "http"},
}

// TestErasCrossed: every upstream of eraUpstreams behind the proxy, reached
// by every client of eraClients. Through the proxy the client answers the
// upstream's elicitation, sampling and roots requests (its answers show in
// the tools' results), and a resource subscription brings the upstream's
// updates (notifications/resources/updated with the URI the proxy lists).
func TestErasCrossed(t *testing.T) {
	for _, up := range eraUpstreams {
		for _, cl := range eraClients {
			name := up.name + "/" + cl.name
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				runErasCase(t, up, cl)
			})
		}
	}
}

// eraCall is one tool call of a combination and what its text must hold.
type eraCall struct {
	tool string
	args map[string]any
	want string
	// again: the call is made again, every eraCallAgain, while its text
	// does not hold want yet (at most callTimeout).
	again bool
}

// eraCallAgain is the pause between the calls of an eraCall with again.
const eraCallAgain = 100 * time.Millisecond

// eraOutcome is what a client saw.
type eraOutcome struct {
	version string // the protocol version it speaks with the proxy
	// calls holds each call's text, or its error as "error: ...".
	calls map[string]string
	// isError holds the calls whose result had isError.
	isError map[string]bool
	// subscribed is the URI the client subscribed to ("" if it found none);
	// updated the one a notifications/resources/updated named ("" if none came).
	subscribed, updated string
}

// runErasCase runs one combination and judges what the client saw.
func runErasCase(t testing.TB, up eraUpstream, cl eraClient) {
	cfg := writeConfig(t, "", up.server(t))
	sampleArgs := up.sampleArgs
	if sampleArgs == nil {
		sampleArgs = map[string]any{}
	}
	calls := []eraCall{
		{up.elicit, map[string]any{}, "Ada Lovelace", false},
		{up.sample, sampleArgs, "Paris, said the client", false},
	}
	if !up.rootsOutside || cl.transport == "stdio" {
		calls = append(calls, eraCall{up.roots, map[string]any{}, up.rootsWant, up.rootsOutside})
	}
	if up.capsTool != "" {
		calls = append(calls, eraCall{up.capsTool, map[string]any{}, "tool executed", false})
	}
	var out *eraOutcome
	if cl.sdk == "ts" {
		out = erasTS(t, cfg, up, cl, calls)
	} else {
		out = erasGo(t, cfg, up, cl, calls)
	}
	if out.version != cl.version {
		t.Errorf("the client speaks %s with the proxy, want %s", out.version, cl.version)
	}
	for _, c := range calls {
		if text := out.calls[c.tool]; out.isError[c.tool] || !strings.Contains(text, c.want) {
			t.Errorf("%s: isError %v, text %q, want it to hold %q", c.tool, out.isError[c.tool], text, c.want)
		}
	}
	switch {
	case out.subscribed == "":
		t.Errorf("resources/list has no %s", up.watched)
	case out.updated != out.subscribed:
		t.Errorf("subscribed to %s, got notifications/resources/updated for %q within %s", out.subscribed, out.updated, callTimeout)
	}
}

// erasGo runs a combination with the Go SDK's client.
func erasGo(t testing.TB, cfg string, up eraUpstream, cl eraClient, calls []eraCall) *eraOutcome {
	updates := make(chan string, 16)
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace"}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "eras-model", Content: &mcp.TextContent{Text: "Paris, said the client"}}, nil
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updates <- req.Params.URI:
			default:
			}
		},
	}
	sopts := &mcp.ClientSessionOptions{ProtocolVersion: cl.version}
	var cs *mcp.ClientSession
	if cl.transport == "stdio" {
		cs = connectErasStdio(t, cfg, opts, sopts)
	} else {
		url, _ := startHTTPProxy(t, cfg)
		cs = connectErasHTTP(t, url, opts, sopts)
	}
	out := &eraOutcome{version: cs.InitializeResult().ProtocolVersion, calls: map[string]string{}, isError: map[string]bool{}}
	for _, c := range calls {
		deadline := time.Now().Add(callTimeout)
		for {
			res, err := cs.CallTool(testCtx(t, callTimeout), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				out.calls[c.tool] = "error: " + err.Error()
			} else {
				out.calls[c.tool], out.isError[c.tool] = contentText(res), res.IsError
			}
			if !c.again || strings.Contains(out.calls[c.tool], c.want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(eraCallAgain)
		}
	}

	// The watched resource, as the proxy lists it.
	ctx := testCtx(t, callTimeout)
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		if r.URI == up.watched || strings.HasSuffix(r.URI, "+"+up.watched) {
			out.subscribed = r.URI
		}
	}
	if out.subscribed == "" {
		return out
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: out.subscribed}); err != nil {
		t.Fatalf("subscribe to %s: %v", out.subscribed, err)
	}
	if up.startUpdates != "" {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: up.startUpdates, Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("%s: %v", up.startUpdates, err)
		}
	}
	deadline := time.After(callTimeout)
	for {
		select {
		case got := <-updates:
			out.updated = got
			if got == out.subscribed {
				return out
			}
		case <-deadline:
			return out
		}
	}
}

// erasTS runs a combination with the TypeScript SDK's client
// (tshost/eras-host.mjs).
func erasTS(t testing.TB, cfg string, up eraUpstream, cl eraClient, calls []eraCall) *eraOutcome {
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
		Until     string         `json:"until,omitempty"`
	}
	list := make([]call, len(calls))
	for i, c := range calls {
		list[i] = call{Name: c.tool, Arguments: c.args}
		if c.again {
			list[i].Until = c.want
		}
	}
	callsJSON, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"tshost/eras-host.mjs"}
	if cl.transport == "stdio" {
		args = append(args, proxyBin, "serve", "--config", cfg)
	} else {
		url, _ := startHTTPProxy(t, cfg)
		args = append(args, url)
	}
	cmd := exec.CommandContext(testCtx(t, startTimeout+5*callTimeout), nodeBin, args...)
	cmd.Env = append(proxyEnv(), "ERAS_CALLS="+string(callsJSON), "ERAS_WATCHED="+up.watched,
		"ERAS_START_UPDATES="+up.startUpdates, "ERAS_ROOT="+eraRoot,
		fmt.Sprintf("ERAS_WAIT_MS=%d", callTimeout.Milliseconds()), fmt.Sprintf("ERAS_AGAIN_MS=%d", eraCallAgain.Milliseconds()))
	cmd.WaitDelay = exitTimeout
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TypeScript client stderr (tail):\n%s", tail(stderr.String(), 4000))
		}
	})
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, tail(stderr.String(), 4000))
	}
	if race := testproc.RaceReport(stderr.String()); race != "" {
		t.Errorf("the stdio proxy reported a data race:\n%s", race)
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
		Calls           map[string]struct {
			IsError bool   `json:"isError"`
			Text    string `json:"text"`
			Error   string `json:"error"`
		} `json:"calls"`
		Subscribed string `json:"subscribed"`
		Updated    string `json:"updated"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("the TypeScript client's report %q: %v\n%s", stdout.String(), err, tail(stderr.String(), 4000))
	}
	out := &eraOutcome{version: r.ProtocolVersion, calls: map[string]string{}, isError: map[string]bool{},
		subscribed: r.Subscribed, updated: r.Updated}
	for name, c := range r.Calls {
		out.calls[name], out.isError[name] = c.Text, c.IsError
		if c.Error != "" {
			out.calls[name] = "error: " + c.Error
		}
	}
	return out
}

// connectErasStdio starts the proxy as the client's stdio server.
func connectErasStdio(t testing.TB, cfg string, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	stderr := &syncBuffer{}
	cmd := proxyCmd("serve", "--config", cfg)
	cmd.Stderr = stderr
	cmd.WaitDelay = exitTimeout
	client := mcp.NewClient(sdkImpl, opts)
	client.AddRoots(&mcp.Root{URI: eraRoot, Name: "client root"})
	cs, err := client.Connect(testCtx(t, startTimeout), &mcp.CommandTransport{Command: cmd, TerminateDuration: exitTimeout}, sopts)
	if err != nil {
		t.Fatalf("go-sdk: connect to the stdio proxy: %v\nstderr:\n%s", err, tail(stderr.String(), 4000))
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if race := testproc.RaceReport(stderr.String()); race != "" {
			t.Errorf("the stdio proxy reported a data race:\n%s", race)
		}
		if t.Failed() {
			t.Logf("stdio proxy stderr (tail):\n%s", tail(stderr.String(), 6000))
		}
	})
	return cs
}

// connectErasHTTP connects the client to the proxy's Streamable HTTP endpoint.
func connectErasHTTP(t testing.TB, url string, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(sdkImpl, opts)
	client.AddRoots(&mcp.Root{URI: eraRoot, Name: "client root"})
	cs, err := client.Connect(testCtx(t, startTimeout), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, sopts)
	if err != nil {
		t.Fatalf("go-sdk: connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestErasMissingCapability: a client that did not declare elicitation
// calls a tool whose upstream asks for it. A 2026-07-28 client's call is
// refused with -32021 (the revision's missing-capability error) when the
// upstream asks; a 2025-11-25 client of a 2026-07-28 upstream gets the
// call's result with isError naming the capability; between a 2025-11-25
// client and a stdio upstream, as before the new era, the proxy refuses the
// upstream's request (-32601) and relays the upstream's answer to that as it
// is (go-sdk's server fails the call: "method not found"). A session-era
// Streamable HTTP upstream is called on a session declaring the client's
// capabilities (docs/protocol.md#upstream-protocol), so it does not ask: it
// refuses the call itself, as it would the client directly, and the client
// of either era gets that refusal as it is.
func TestErasMissingCapability(t *testing.T) {
	clients := []eraClient{
		{"go-sdk/2025-11-25/stdio", "go", "2025-11-25", "stdio"},
		{"go-sdk/2025-11-25/http", "go", "2025-11-25", "http"},
		{"go-sdk/2026-07-28/stdio", "go", "2026-07-28", "stdio"},
		{"go-sdk/2026-07-28/http", "go", "2026-07-28", "http"},
	}
	for _, up := range eraUpstreams[:4] {
		for _, cl := range clients {
			name := up.name + "/" + cl.name
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				runMissingCapability(t, up, cl)
			})
		}
	}
}

func runMissingCapability(t testing.TB, up eraUpstream, cl eraClient) {
	cfg := writeConfig(t, "", up.server(t))
	// No handlers: the client declares neither elicitation nor sampling.
	opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	sopts := &mcp.ClientSessionOptions{ProtocolVersion: cl.version}
	var cs *mcp.ClientSession
	if cl.transport == "stdio" {
		cs = connectErasStdio(t, cfg, opts, sopts)
	} else {
		url, _ := startHTTPProxy(t, cfg)
		cs = connectErasHTTP(t, url, opts, sopts)
	}
	res, err := cs.CallTool(testCtx(t, callTimeout), &mcp.CallToolParams{Name: up.elicit, Arguments: map[string]any{}})
	if up.name == "http/2025-11-25" {
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code == -32021 || !strings.Contains(werr.Message, "client does not support elicitation") {
			t.Errorf("%s from a client without elicitation: %v, want the upstream's own refusal (client does not support elicitation)", up.elicit, err)
		}
		return
	}
	if cl.version == "2026-07-28" {
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != -32021 {
			text := ""
			if res != nil {
				text = contentText(res)
			}
			t.Errorf("%s from a client without elicitation: %v (result %q), want the JSON-RPC error -32021", up.elicit, err, text)
		}
		return
	}
	if up.protocol == "2025-11-25" {
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code == -32021 || !strings.Contains(werr.Message, "method not found") {
			t.Errorf("%s from a client without elicitation: %v, want the upstream's own error for the refusal (method not found)", up.elicit, err)
		}
		return
	}
	switch {
	case err != nil:
		t.Errorf("%s from a client without elicitation: %v, want a result with isError", up.elicit, err)
	case !res.IsError || !strings.Contains(contentText(res), "elicitation"):
		t.Errorf("%s from a client without elicitation: isError %v, text %q, want isError naming elicitation", up.elicit, res.IsError, contentText(res))
	}
}
