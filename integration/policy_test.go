package integration

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Agents, bundles and tool policy, end to end. Helpers of these files start
// with pol.

// polTokenBob is bob's bearer token in polConfig.
const polTokenBob = "pol-token-bob-6c1d0e"

// polConfig: alice gets alpha and beta (bundle ab) without alpha's sleep
// (excluded_tools); bob gets gamma (bundle g), whose own tools.exclude
// hides hang, and needs a bearer token. defaultAgent "" sets no
// default_agent.
func polConfig(t testing.TB, defaultAgent string) string {
	t.Helper()
	top := ""
	if defaultAgent != "" {
		top = "default_agent: " + defaultAgent + "\n"
	}
	top += `bundles:
  ab: {servers: [alpha, beta]}
  g: {servers: [gamma]}
agents:
  alice:
    mcp_bundles: [ab]
    excluded_tools: [alpha__sleep]
  bob:
    mcp_bundles: [g]
    tokens: [` + q(polTokenBob) + `]
`
	return writeConfig(t, top,
		fixtureServer("alpha", []string{"-no-weird"}),
		fixtureServer("beta", []string{"-no-weird"}),
		fixtureServer("gamma", []string{"-no-weird"}, "tools: {exclude: [hang]}"),
	)
}

// polHeaders is a RoundTripper that adds headers to every request.
type polHeaders struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h polHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// polConnect connects the go-sdk client to url with extra headers on every
// request; proto "" is the SDK's default.
func polConnect(t testing.TB, url string, headers map[string]string, proto string) (*mcp.ClientSession, error) {
	t.Helper()
	var sopts *mcp.ClientSessionOptions
	if proto != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: proto}
	}
	hc := &http.Client{Transport: polHeaders{base: http.DefaultTransport, headers: headers}}
	ctx := testCtx(t, startTimeout)
	cs, err := mcp.NewClient(sdkImpl, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, sopts)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// polMustConnect is polConnect that must succeed.
func polMustConnect(t testing.TB, url string, headers map[string]string, proto string) *mcp.ClientSession {
	t.Helper()
	cs, err := polConnect(t, url, headers, proto)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	return cs
}

// polPost POSTs one JSON-RPC message and returns the status, headers and body.
func polPost(t testing.TB, url string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: callTimeout}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

const polInitBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"pol","version":"1"}}}`

// polServerTools returns the names of names that belong to an upstream
// (hold "__"), sorted as given.
func polServerTools(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.Contains(n, "__") {
			out = append(out, n)
		}
	}
	return out
}

// polHasPrefix reports whether some name starts with prefix.
func polHasPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// polDenied checks a call refused by a policy rule: an isError result whose
// text names the tool and the rule.
func polDenied(t testing.TB, cs *mcp.ClientSession, name, rule string) {
	t.Helper()
	res, err := rsCall(cs, name, map[string]any{"text": "x"}, callTimeout)
	if err != nil {
		t.Errorf("%s: JSON-RPC error %v, want an isError result naming %s", name, err, rule)
		return
	}
	want := "tool '" + name + "' is denied by " + rule
	if !res.IsError || !strings.Contains(contentText(res), want) {
		t.Errorf("%s: isError %v text %q, want isError with %q", name, res.IsError, contentText(res), want)
	}
}

// polUnknown checks a call to a tool the agent must not know of.
func polUnknown(t testing.TB, cs *mcp.ClientSession, name string) {
	t.Helper()
	_, err := rsCall(cs, name, map[string]any{"text": "x"}, callTimeout)
	werr := rsRPCError(err)
	if werr == nil || werr.Code != -32602 || werr.Message != "unknown tool: "+name {
		t.Errorf("%s: %v, want JSON-RPC -32602 \"unknown tool: %s\"", name, err, name)
	}
}

// TestPolicyHTTPAgents: one HTTP proxy, two agents on their own paths with
// different grants, a bearer token, the default path serving default_agent,
// hidden and denied tools, X-MCP-Allowed-Tools, Origin checks and session
// ids bound to their agent.
func TestPolicyHTTPAgents(t *testing.T) {
	t.Parallel()
	mcpURL, _ := startHTTPProxy(t, polConfig(t, "alice"))
	base := strings.TrimSuffix(mcpURL, "/mcp")
	aliceURL, bobURL := base+"/agents/alice/mcp", base+"/agents/bob/mcp"
	bobAuth := map[string]string{"Authorization": "Bearer " + polTokenBob}

	t.Run("grants", func(t *testing.T) {
		t.Parallel()
		alice := polMustConnect(t, aliceURL, nil, "")
		names := rsWaitListed(t, alice, callTimeout, "alpha__echo", "beta__echo")
		if polHasPrefix(names, "gamma__") || hasName(names, "alpha__sleep") {
			t.Errorf("alice lists a tool she may not reach (gamma__*, alpha__sleep): %v", names)
		}
		bob := polMustConnect(t, bobURL, bobAuth, "")
		bnames := rsWaitListed(t, bob, callTimeout, "gamma__echo")
		if polHasPrefix(bnames, "alpha__") || polHasPrefix(bnames, "beta__") || hasName(bnames, "gamma__hang") {
			t.Errorf("bob lists a tool he may not reach (alpha__*, beta__*, gamma__hang): %v", bnames)
		}
		t.Logf("alice: %v", polServerTools(names))
		t.Logf("bob: %v", polServerTools(bnames))

		polUnknown(t, alice, "gamma__echo") // server not granted
		polUnknown(t, bob, "gamma__hang")   // the server's own tools.exclude
		polDenied(t, alice, "alpha__sleep", "excluded_tools")
		if got := contentText(callTool(t, alice, "beta__echo", map[string]any{"text": "hi alice"})); got != "hi alice" {
			t.Errorf("alice beta__echo: %q", got)
		}
		if got := contentText(callTool(t, bob, "gamma__echo", map[string]any{"text": "hi bob"})); got != "hi bob" {
			t.Errorf("bob gamma__echo: %q", got)
		}
	})

	t.Run("bearer token", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name    string
			headers map[string]string
		}{
			{"missing", nil},
			{"wrong", map[string]string{"Authorization": "Bearer not-" + polTokenBob}},
			{"not bearer", map[string]string{"Authorization": "Basic " + polTokenBob}},
		} {
			status, hdr, body := polPost(t, bobURL, c.headers, polInitBody)
			if status != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s token: initialize got HTTP %d (WWW-Authenticate %q), want 401 with a Bearer challenge", c.name, status, hdr.Get("WWW-Authenticate"))
			}
			if strings.Contains(body, "gamma__") || strings.Contains(body, polTokenBob) {
				t.Errorf("%s token: the 401 body says too much: %q", c.name, body)
			}
			status, _, body = polPost(t, bobURL, c.headers, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
			if status != http.StatusUnauthorized || strings.Contains(body, "gamma__") {
				t.Errorf("%s token: tools/list got HTTP %d %q, want 401 and no tools", c.name, status, tail(body, 300))
			}
			if _, err := polConnect(t, bobURL, c.headers, ""); err == nil {
				t.Errorf("%s token: the go-sdk client connected to bob's path", c.name)
			} else if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
				t.Errorf("%s token: go-sdk connect error %q does not say 401 / Unauthorized", c.name, err)
			}
		}
	})

	t.Run("default path", func(t *testing.T) {
		t.Parallel()
		cs := polMustConnect(t, mcpURL, nil, "")
		names := rsWaitListed(t, cs, callTimeout, "alpha__echo", "beta__echo")
		if polHasPrefix(names, "gamma__") {
			t.Errorf("the default path (default_agent alice) lists %v", names)
		}
		status, _, body := polPost(t, base+"/agents/mallory/mcp", nil, polInitBody)
		if status != http.StatusNotFound || body != "Not Found: unknown agent\n" {
			t.Errorf("an unknown agent's path: HTTP %d %q, want 404 with a fixed text naming no agent", status, body)
		}
	})

	t.Run("X-MCP-Allowed-Tools", func(t *testing.T) {
		t.Parallel()
		for _, proto := range []string{"2025-11-25", ""} {
			h := map[string]string{"X-MCP-Allowed-Tools": "alpha__echo, gamma__echo,alpha__sleep"}
			cs := polMustConnect(t, aliceURL, h, proto)
			names := toolNames(listTools(t, cs))
			// alpha__echo only: gamma is not granted, alpha__sleep is
			// excluded, and the list admits nothing by prefix.
			if len(names) != 1 || names[0] != "alpha__echo" {
				t.Errorf("protocol %q: alice narrowed to %q lists %v, want exactly [alpha__echo]", proto, h["X-MCP-Allowed-Tools"], names)
			}
			if got := contentText(callTool(t, cs, "alpha__echo", map[string]any{"text": "narrow"})); got != "narrow" {
				t.Errorf("alpha__echo: %q", got)
			}
			polDenied(t, cs, "beta__echo", "per_call_allowed_tools")
			polDenied(t, cs, "alpha__sleep", "excluded_tools")
			polUnknown(t, cs, "gamma__echo")
		}
	})

	t.Run("Origin", func(t *testing.T) {
		t.Parallel()
		status, _, body := polPost(t, aliceURL, map[string]string{"Origin": "https://evil.example"}, polInitBody)
		if status != http.StatusForbidden {
			t.Errorf("initialize with Origin https://evil.example: HTTP %d %q, want 403", status, body)
		}
		own := strings.TrimSuffix(base, "/")
		if status, _, body := polPost(t, aliceURL, map[string]string{"Origin": own}, polInitBody); status != http.StatusOK {
			t.Errorf("initialize with the proxy's own Origin %s: HTTP %d %q, want 200", own, status, body)
		}
	})

	t.Run("session bound to its agent", func(t *testing.T) {
		t.Parallel()
		status, hdr, body := polPost(t, aliceURL, nil, polInitBody)
		sid := hdr.Get("Mcp-Session-Id")
		if status != http.StatusOK || sid == "" {
			t.Fatalf("initialize on alice's path: HTTP %d session %q %q", status, sid, body)
		}
		list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
		with := func(extra map[string]string) map[string]string {
			h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
			for k, v := range extra {
				h[k] = v
			}
			return h
		}
		status, _, body = polPost(t, bobURL, with(bobAuth), list)
		if status != http.StatusNotFound || strings.Contains(body, "gamma__") || strings.Contains(body, "alpha__") {
			t.Errorf("alice's session id on bob's path: HTTP %d %q, want 404", status, tail(body, 300))
		}
		status, _, body = polPost(t, aliceURL, with(nil), list)
		if status != http.StatusOK || !strings.Contains(body, "alpha__echo") {
			t.Errorf("alice's session id on alice's path: HTTP %d %q, want 200 with her tools", status, tail(body, 300))
		}
	})
}

// TestPolicyHTTPNoDefaultAgent: with agents and no default_agent, an HTTP
// proxy serves every agent on its own path, and the default path answers
// 404 listing the agents (docs/agents.md#agents-bundles-and-policy).
func TestPolicyHTTPNoDefaultAgent(t *testing.T) {
	t.Parallel()
	mcpURL, _ := startHTTPProxy(t, polConfig(t, ""))
	base := strings.TrimSuffix(mcpURL, "/mcp")
	status, _, body := polPost(t, mcpURL, nil, polInitBody)
	if status != http.StatusNotFound || !strings.Contains(body, "alice") || !strings.Contains(body, "bob") {
		t.Errorf("POST %s: HTTP %d %q, want 404 listing the agents alice and bob", mcpURL, status, body)
	}
	alice := polMustConnect(t, base+"/agents/alice/mcp", nil, "")
	rsWaitListed(t, alice, callTimeout, "alpha__echo")
	bob := polMustConnect(t, base+"/agents/bob/mcp", map[string]string{"Authorization": "Bearer " + polTokenBob}, "")
	rsWaitListed(t, bob, callTimeout, "gamma__echo")
}

// TestPolicyStdio: on stdio, --agent picks the agent and --allowed-tools
// narrows it; an unknown agent, or none when agents exist and no
// default_agent is set, is a usage error (exit 2) that lists the agents.
func TestPolicyStdio(t *testing.T) {
	t.Parallel()
	cfg := polConfig(t, "")

	t.Run("agent", func(t *testing.T) {
		t.Parallel()
		cs, _, _ := sdkStdioProxyCmd(t, cfg, nil, nil, "--agent", "alice")
		names := rsWaitListed(t, cs, callTimeout, "alpha__echo", "beta__echo")
		if polHasPrefix(names, "gamma__") || hasName(names, "alpha__sleep") {
			t.Errorf("--agent alice lists %v", names)
		}
		polUnknown(t, cs, "gamma__echo")
		polDenied(t, cs, "alpha__sleep", "excluded_tools")
	})

	t.Run("allowed-tools", func(t *testing.T) {
		t.Parallel()
		cs, _, _ := sdkStdioProxyCmd(t, cfg, nil, nil, "--agent", "alice", "--allowed-tools", "beta__echo,gamma__echo")
		names := toolNames(listTools(t, cs))
		if len(names) != 1 || names[0] != "beta__echo" {
			t.Errorf("--agent alice --allowed-tools beta__echo,gamma__echo lists %v, want exactly [beta__echo]", names)
		}
		if got := contentText(callTool(t, cs, "beta__echo", map[string]any{"text": "ok"})); got != "ok" {
			t.Errorf("beta__echo: %q", got)
		}
		polDenied(t, cs, "alpha__echo", "per_call_allowed_tools")
	})

	t.Run("unknown agent", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"serve", "--config", cfg, "--agent", "mallory"},
			{"serve", "--config", cfg},
		} {
			_, stderr, code := runCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, "alice") || !strings.Contains(stderr, "bob") {
				t.Errorf("mcp-proxy %s: exit %d, stderr:\n%s\nwant exit 2 listing the agents alice and bob", strings.Join(args[3:], " "), code, tail(stderr, 2000))
			}
		}
	})
}

// TestPolicyValidateWarnings: `validate` prints each of the seed's three
// warnings (servers but no bundles; a bundle naming an unknown server; an
// agent naming an unknown bundle) and still exits 0.
func TestPolicyValidateWarnings(t *testing.T) {
	t.Parallel()
	fx := fixtureServer("fx", []string{"-no-weird"})
	for _, c := range []struct {
		name, top, want string
	}{
		{"no bundles", "agents:\n  alice: {mcp_bundles: []}\n", "servers are configured but no bundle grants them"},
		{"unknown server", "bundles:\n  b: {servers: [fx, ghost]}\nagents:\n  alice: {mcp_bundles: [b]}\n", `unknown server "ghost" grants nothing`},
		{"unknown bundle", "bundles:\n  b: {servers: [fx]}\nagents:\n  alice: {mcp_bundles: [b, nobundle]}\n", `unknown bundle "nobundle" grants nothing`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runCLI(t, "validate", "--config", writeConfig(t, c.top, fx))
			if code != 0 || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("validate: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0 and the warning %q", code, stdout, tail(stderr, 2000), c.want)
			}
		})
	}
}
