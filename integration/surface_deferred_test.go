package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sfDeferredAgent is an agent block of the deferred tests: the fixture fx
// granted, fx__crash denied by excluded_tools, fx__echo in an always group.
const sfDeferredAgent = `    mcp_bundles: [all]
    excluded_tools: [fx__crash]
    tool_filter_groups: [{mode: always, tools: [fx__echo]}]
`

// sfFunctionNames returns the names of tool_search's <function> lines, in
// order (none for the no-match text).
func sfFunctionNames(t testing.TB, out string) []string {
	t.Helper()
	if out == "No matching deferred tools found." {
		return nil
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		body, ok := strings.CutPrefix(line, "<function>")
		if !ok {
			continue
		}
		body, ok = strings.CutSuffix(body, "</function>")
		if !ok {
			t.Fatalf("tool_search line %q does not end with </function>", line)
		}
		var f struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			t.Fatalf("tool_search line %q: %v", line, err)
		}
		if f.Name == "" || len(f.Parameters) == 0 || f.Parameters[0] != '{' {
			t.Errorf("tool_search line %q lacks a name or an object of parameters", line)
		}
		names = append(names, f.Name)
	}
	if !strings.HasPrefix(out, "<functions>\n") || !strings.Contains(out, "</functions>\n") {
		t.Errorf("tool_search output is not wrapped in <functions>…</functions>: %q", out)
	}
	return names
}

// sfDeferredList returns the names in the <available-deferred-tools> block
// of the instructions, checking each line's "<name> - <description>" form.
func sfDeferredList(t testing.TB, instructions string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(instructions, "<available-deferred-tools>\n")
	block, _, ok2 := strings.Cut(rest, "</available-deferred-tools>")
	if !ok || !ok2 {
		t.Fatalf("the instructions hold no <available-deferred-tools> block:\n%s", tail(instructions, 2000))
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		name, desc, ok := strings.Cut(line, " - ")
		if !ok || name == "" || desc == "" {
			t.Errorf("deferred tool line %q is not `<name> - <first line of description>`", line)
		}
		names = append(names, name)
	}
	return names
}

// TestSurfaceDeferred: with deferred_loading, tools/list holds tool_search,
// call_tool and the always group; the instructions list every other tool
// the agent may call (not the denied one); tool_search activates what it
// returns and the session gets list_changed; call_tool and direct calls
// reach tools that were never activated; a denied tool is neither found
// nor callable.
func TestSurfaceDeferred(t *testing.T) {
	t.Parallel()
	fxArgs := []string{"-no-weird", "-tools", "12"}
	cfg := writeConfig(t, "deferred_loading: true\nbundles: {all: {servers: [fx]}}\nagents:\n  dev:\n"+sfDeferredAgent+"default_agent: dev\n",
		fixtureServer("fx", fxArgs, "tools: {resources: false, prompts: false}"))
	changed := make(chan struct{}, 16)
	p := sfStdioProxy(t, cfg, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, sfSession())
	cs := p.cs

	// The listing: the meta tools and the always group only.
	if got, want := toolNames(listTools(t, cs)), []string{"call_tool", "fx__echo", "tool_search"}; !slices.Equal(got, want) {
		t.Fatalf("deferred tools/list: %v, want %v", got, want)
	}

	// The instructions: every granted tool but the listed and the denied ones.
	instr := cs.InitializeResult().Instructions
	if !strings.Contains(instr, "## Deferred Tools\n") || !strings.Contains(instr, "tool_search") {
		t.Errorf("instructions lack the `## Deferred Tools` section naming tool_search:\n%s", tail(instr, 2000))
	}
	var want []string
	for _, tool := range listTools(t, sdkDirectStdio(t, fixtureBin, fxArgs...)) {
		if n := "fx__" + tool.Name; n != "fx__echo" && n != "fx__crash" {
			want = append(want, n)
		}
	}
	got := sfDeferredList(t, instr)
	sort.Strings(want)
	sorted := slices.Clone(got)
	sort.Strings(sorted)
	if !slices.Equal(sorted, want) {
		t.Errorf("<available-deferred-tools> names %v, want %v", got, want)
	}
	if !strings.Contains(instr, "\nfx__sleep - Waits ms milliseconds, then answers \"slept\". A cancelled call gets no answer.\n") {
		t.Errorf("the deferred list lacks fx__sleep's line with its description:\n%s", tail(instr, 3000))
	}

	drain := func() {
		for {
			select {
			case <-changed:
			default:
				return
			}
		}
	}
	search := func(args map[string]any) string {
		t.Helper()
		return sfOK(t, cs, "tool_search", args)
	}

	t.Run("select activates and notifies", func(t *testing.T) {
		drain()
		out := search(map[string]any{"query": "select:fx__sleep"})
		if names := sfFunctionNames(t, out); !slices.Equal(names, []string{"fx__sleep"}) || strings.Contains(out, "Not found") {
			t.Errorf("select:fx__sleep gave %q", out)
		}
		select {
		case <-changed:
		case <-time.After(callTimeout):
			t.Fatalf("no notifications/tools/list_changed within %s of the activation", callTimeout)
		}
		if names := toolNames(listTools(t, cs)); !hasName(names, "fx__sleep") || len(names) != 4 {
			t.Errorf("tools/list after activating fx__sleep: %v, want the meta tools, fx__echo and fx__sleep", names)
		}
		if got := sfOK(t, cs, "fx__sleep", map[string]any{"ms": 1}); got != "slept" {
			t.Errorf("fx__sleep after activation: %q", got)
		}
		// Selecting it again activates nothing new: no second list_changed.
		search(map[string]any{"query": "select:fx__sleep"})
		select {
		case <-changed:
			t.Errorf("a second list_changed for a tool already active")
		case <-time.After(500 * time.Millisecond):
		}
	})

	t.Run("keyword search", func(t *testing.T) {
		out := search(map[string]any{"query": "environment variables set", "max_results": 2})
		names := sfFunctionNames(t, out)
		if len(names) == 0 || len(names) > 2 || names[0] != "fx__env" {
			t.Errorf("keyword search (max_results 2) gave %v, want fx__env first and at most 2: %q", names, out)
		}
		if got := search(map[string]any{"query": "qqzzxxwwvv"}); got != "No matching deferred tools found." {
			t.Errorf("search without a match: %q", got)
		}
		if got := sfToolError(t, cs, "tool_search", map[string]any{"query": "  "}); got != "query parameter is required" {
			t.Errorf("blank query: %q", got)
		}
		if got := sfToolError(t, cs, "tool_search", map[string]any{}); got != "query parameter is required" {
			t.Errorf("no query: %q", got)
		}
	})

	t.Run("call_tool without activation", func(t *testing.T) {
		if got := sfOK(t, cs, "call_tool", map[string]any{"name": "fx__echo", "arguments": map[string]any{"text": "via call_tool"}}); got != "via call_tool" {
			t.Errorf("call_tool fx__echo: %q", got)
		}
		if got := sfOK(t, cs, "call_tool", map[string]any{"name": "fx__tool_0007", "arguments": map[string]any{}}); got != "tool_0007 ok" {
			t.Errorf("call_tool fx__tool_0007: %q", got)
		}
		// Deferral is not a permission: a granted tool never activated is
		// callable by its name.
		if got := sfOK(t, cs, "fx__progress", map[string]any{"steps": 1}); got != "progress done: 1 steps" {
			t.Errorf("direct call of the never-activated fx__progress: %q", got)
		}
		if names := toolNames(listTools(t, cs)); hasName(names, "fx__tool_0007") || hasName(names, "fx__progress") {
			t.Errorf("calling without tool_search activated tools: %v", names)
		}
		// call_tool returns whatever the direct call would: an unknown tool
		// is the same JSON-RPC error.
		ctx := testCtx(t, callTimeout)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "fx__nope"}})
		if werr := sfRPCError(t, "call_tool fx__nope", err); werr.Code != -32602 || werr.Message != "unknown tool: fx__nope" {
			t.Errorf("call_tool fx__nope: %d %q, want -32602 \"unknown tool: fx__nope\"", werr.Code, werr.Message)
		}
	})

	t.Run("denied tool", func(t *testing.T) {
		drain()
		out := search(map[string]any{"query": "select:fx__crash,fx__flood"})
		if names := sfFunctionNames(t, out); !slices.Equal(names, []string{"fx__flood"}) {
			t.Errorf("select:fx__crash,fx__flood found %v, want only fx__flood", names)
		}
		if !strings.HasSuffix(out, "\nNot found: fx__crash") {
			t.Errorf("select of the denied tool does not end with `Not found: fx__crash`: %q", out)
		}
		for _, q := range []string{"crash", "ends the server process exit code"} {
			if names := sfFunctionNames(t, search(map[string]any{"query": q, "max_results": 50})); slices.Contains(names, "fx__crash") {
				t.Errorf("keyword search %q returned the denied fx__crash", q)
			}
		}
		const denial = "tool 'fx__crash' is denied by excluded_tools"
		if got := sfToolError(t, cs, "call_tool", map[string]any{"name": "fx__crash"}); got != denial {
			t.Errorf("call_tool fx__crash: %q, want %q", got, denial)
		}
		if got := sfToolError(t, cs, "fx__crash", map[string]any{}); got != denial {
			t.Errorf("direct fx__crash: %q, want %q", got, denial)
		}
		if names := toolNames(listTools(t, cs)); hasName(names, "fx__crash") || !hasName(names, "fx__flood") {
			t.Errorf("tools/list after the denied select: %v", names)
		}
		// The fixture is alive: the denied call never reached it.
		if got := sfOK(t, cs, "fx__echo", map[string]any{"text": "alive"}); got != "alive" {
			t.Errorf("fx__echo after the denied calls: %q", got)
		}
	})
}

// TestSurfaceDeferredPerAgent: deferred_loading set on one agent only, over
// HTTP. The eager agent lists the fixture's tools; the lazy one lists only
// tool_search and call_tool (whatever its allowed_tools say), and an
// activation shows in the session that searched and in no other.
func TestSurfaceDeferredPerAgent(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `bundles: {all: {servers: [fx]}}
agents:
  eager:
    mcp_bundles: [all]
  lazy:
    mcp_bundles: [all]
    deferred_loading: true
    allowed_tools: [fx__sleep, fx__echo]
default_agent: eager
`, fixtureServer("fx", []string{"-no-weird", "-tools", "5"}, "tools: {resources: false, prompts: false}"))
	url, _ := startHTTPProxy(t, cfg)
	lazyURL := strings.TrimSuffix(url, "/mcp") + "/agents/lazy/mcp"

	eager := toolNames(listTools(t, sdkHTTP(t, url, nil, sfSession())))
	if hasName(eager, "tool_search") || !hasName(eager, "fx__sleep") || !hasName(eager, "fx__tool_0005") {
		t.Errorf("eager agent lists %v, want the fixture's tools and no tool_search", eager)
	}

	var changedA, changedB atomic.Int32
	a := sdkHTTP(t, lazyURL, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changedA.Add(1) },
	}, sfSession())
	b := sdkHTTP(t, lazyURL, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changedB.Add(1) },
	}, sfSession())
	meta := []string{"call_tool", "tool_search"}
	for name, cs := range map[string]*mcp.ClientSession{"A": a, "B": b} {
		if got := toolNames(listTools(t, cs)); !slices.Equal(got, meta) {
			t.Errorf("lazy session %s lists %v, want %v", name, got, meta)
		}
		if !strings.Contains(cs.InitializeResult().Instructions, "<available-deferred-tools>\n") {
			t.Errorf("lazy session %s: no <available-deferred-tools> in the instructions", name)
		}
	}
	if instr := sdkHTTP(t, url, nil, sfSession()).InitializeResult().Instructions; strings.Contains(instr, "Deferred Tools") {
		t.Errorf("the eager agent's instructions carry the deferred section")
	}

	out := sfOK(t, a, "tool_search", map[string]any{"query": "select:fx__sleep,fx__tool_0002"})
	if names := sfFunctionNames(t, out); !slices.Equal(names, []string{"fx__sleep", "fx__tool_0002"}) {
		t.Errorf("select in session A: %q", out)
	}
	if !sfWaitFor(callTimeout, func() bool { return changedA.Load() > 0 }) {
		t.Fatalf("session A got no list_changed after its tool_search")
	}
	if got, want := toolNames(listTools(t, a)), []string{"call_tool", "fx__sleep", "fx__tool_0002", "tool_search"}; !slices.Equal(got, want) {
		t.Errorf("session A after its activation lists %v, want %v", got, want)
	}
	if got := toolNames(listTools(t, b)); !slices.Equal(got, meta) {
		t.Errorf("session B lists %v after session A's activation, want %v", got, meta)
	}
	time.Sleep(300 * time.Millisecond) // a stray notification would have arrived by now
	if n := changedB.Load(); n != 0 {
		t.Errorf("session B got %d list_changed for session A's activation", n)
	}
	if got := sfOK(t, b, "fx__sleep", map[string]any{"ms": 1}); got != "slept" {
		t.Errorf("session B's direct call of fx__sleep: %q", got)
	}
}

// TestSurfaceDeferredScale measures the proxy in front of 10,000 tools in
// deferred mode: its peak memory (VmHWM) after start and after a few
// tool_search queries, and tool_search's latency through the proxy.
func TestSurfaceDeferredScale(t *testing.T) {
	t.Parallel()
	const tools = 10000
	cfg := writeConfig(t, "deferred_loading: true\nstartup_wait: 60s\n",
		fixtureServer("big", []string{"-tools", fmt.Sprint(tools), "-only-synthetic"},
			"tools: {resources: false, prompts: false}", "connect_timeout: 60s"))
	start := time.Now()
	p := sfStdioProxy(t, cfg, nil, sfSession())
	initTook := time.Since(start)
	cs := p.cs
	instr := cs.InitializeResult().Instructions
	if n := len(sfDeferredList(t, instr)); n != tools {
		t.Fatalf("the instructions list %d deferred tools, want %d", n, tools)
	}
	if got := toolNames(listTools(t, cs)); !slices.Equal(got, []string{"call_tool", "tool_search"}) {
		t.Fatalf("tools/list: %v", got)
	}
	hwmStart, rssStart := sfMem(t, p.pid)

	queries := []string{
		"weather forecast for a city", "invoice status and amount", "translate text into a language",
		"shipment tracking number delivery", "create a calendar event", "git commits on a branch",
		"convert currency", "post a message to a chat channel", "resize an image", "search issues",
	}
	var lat []time.Duration
	for round := range 3 {
		for _, query := range queries {
			t0 := time.Now()
			out := sfOK(t, cs, "tool_search", map[string]any{"query": query, "max_results": 5})
			lat = append(lat, time.Since(t0))
			if n := len(sfFunctionNames(t, out)); n != 5 {
				t.Errorf("round %d, %q: %d results, want 5", round, query, n)
			}
		}
	}
	t0 := time.Now()
	out := sfOK(t, cs, "tool_search", map[string]any{"query": "select:big__tool_0001,big__tool_9999,big__tool_10000"})
	selectTook := time.Since(t0)
	if names := sfFunctionNames(t, out); len(names) != 3 {
		t.Errorf("select of three tools: %q", out)
	}
	hwmAfter, rssAfter := sfMem(t, p.pid)
	first := lat[0]
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p90, worst := lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1]
	t.Logf("FIGURES deferred scale (%s, %d tools): start to initialized %s, instructions %d bytes; "+
		"VmHWM %d KiB (VmRSS %d KiB) after start, VmHWM %d KiB (VmRSS %d KiB) after %d tool_search queries; "+
		"keyword tool_search latency (%d queries) first %s p50 %s p90 %s max %s; select of 3 %s",
		sfBuild(), tools, initTook.Round(time.Millisecond), len(instr), hwmStart, rssStart, hwmAfter, rssAfter, len(lat)+1,
		len(lat), first.Round(time.Microsecond), p50.Round(time.Microsecond), p90.Round(time.Microsecond), worst.Round(time.Microsecond),
		selectTook.Round(time.Microsecond))
	// Bounds generous enough for a race-enabled build on a busy machine.
	if p50 > 2*time.Second {
		t.Errorf("tool_search p50 latency %s over 10,000 tools, want under 2s", p50)
	}
	if limit := int64(1 << 20); hwmAfter > limit { // 1 GiB
		t.Errorf("the proxy peaked at %d KiB in front of %d tools, want under %d KiB", hwmAfter, tools, limit)
	}
	if re := regexp.MustCompile(`(?m)^big__tool_\d{4,5} - `); len(re.FindAllString(instr, -1)) != tools {
		t.Errorf("not every deferred line names a big__tool_N")
	}
}

// TestSurfaceDeferredModernClient: the go-sdk v1.8.0 client's default
// protocol is the stateless 2026-07-28 revision, which replaces initialize
// with server/discover; its result has an instructions member, and a host
// on that revision has no other place to learn the deferred tools from.
// Over stdio and over HTTP, the discover result must carry the deferred
// section, and tool_search, call_tool and a direct call must work.
func TestSurfaceDeferredModernClient(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "deferred_loading: true\n",
		fixtureServer("fx", []string{"-no-weird", "-tools", "3"}, "tools: {resources: false, prompts: false}"))
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			cs := sfConnect(t, tr, cfg, nil, nil).cs
			if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				t.Logf("negotiated %s (the go-sdk default changed?)", v)
			}
			if got := toolNames(listTools(t, cs)); !slices.Equal(got, []string{"call_tool", "tool_search"}) {
				t.Errorf("tools/list: %v, want [call_tool tool_search]", got)
			}
			instr := cs.InitializeResult().Instructions
			if !strings.Contains(instr, "## Deferred Tools") || !strings.Contains(instr, "<available-deferred-tools>\nfx__") {
				t.Errorf("a %s client on protocol %s got instructions %q: no deferred section, so the model is never told which tools exist",
					tr, cs.InitializeResult().ProtocolVersion, tail(instr, 300))
			}
			if names := sfFunctionNames(t, sfOK(t, cs, "tool_search", map[string]any{"query": "select:fx__tool_0002"})); !slices.Equal(names, []string{"fx__tool_0002"}) {
				t.Errorf("select:fx__tool_0002 found %v", names)
			}
			if got := sfOK(t, cs, "call_tool", map[string]any{"name": "fx__tool_0003"}); got != "tool_0003 ok" {
				t.Errorf("call_tool fx__tool_0003: %q", got)
			}
			if got := sfOK(t, cs, "fx__tool_0001", map[string]any{}); got != "tool_0001 ok" {
				t.Errorf("direct fx__tool_0001: %q", got)
			}
		})
	}
}

// TestSurfaceHTTPAgentsWithoutDefault: over HTTP, agents without a
// default_agent is a valid setup: /agents/<alias>/mcp serves each agent and
// the default path answers 404 listing the agents (docs/agents.md#agents-bundles-and-policy).
func TestSurfaceHTTPAgentsWithoutDefault(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "bundles: {all: {servers: [fx]}}\nagents:\n  lazy: {mcp_bundles: [all], deferred_loading: true}\n",
		fixtureServer("fx", []string{"-no-weird"}, "tools: {resources: false, prompts: false}"))
	url, _ := startHTTPProxy(t, cfg)
	cs := sdkHTTP(t, strings.TrimSuffix(url, "/mcp")+"/agents/lazy/mcp", nil, sfSession())
	if got := toolNames(listTools(t, cs)); !slices.Equal(got, []string{"call_tool", "tool_search"}) {
		t.Errorf("agent lazy lists %v", got)
	}
	c := newHTTPRaw(url)
	resp := c.post(t, envelope(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`))
	defer resp.Body.Close()
	body := make([]byte, 4096)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != 404 || !strings.Contains(string(body[:n]), "lazy") {
		t.Errorf("the default path without default_agent: HTTP %d %q, want 404 listing the agents", resp.StatusCode, body[:n])
	}
}
