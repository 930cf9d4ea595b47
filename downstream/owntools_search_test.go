package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

const deferredYAML = `
startup_wait: 2s
deferred_loading: true
blobs: {mode: passthrough}
servers:
  fs: {command: fs}
bundles:
  all: {servers: [fs]}
agents:
  dev:
    mcp_bundles: [all]
    excluded_tools: [fs__write_file]
    tool_filter_groups:
      - {mode: always, tools: ["fs__list_*"]}
  eager:
    mcp_bundles: [all]
    deferred_loading: false
    tool_filter_groups:
      - {mode: always, tools: ["fs__read_*"]}
      - {mode: dynamic, tools: ["fs__write_*"], keywords: [write, save]}
default_agent: dev
`

func deferredProxy(t *testing.T) (*Proxy, *fakeUpstream) {
	t.Helper()
	up := connected(
		`{"name":"read_file","description":"Read the complete contents of a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`,
		`{"name":"write_file","description":"Create or overwrite a file with new content.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}`,
		`{"name":"list_directory","description":"List the entries of a directory.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`,
		`{"name":"search_files","description":"Find files whose names match a pattern.","inputSchema":{"type":"object","properties":{"pattern":{"type":"string"}}}}`,
	)
	up.RequestFn = func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	}
	return newProxy(t, deferredYAML, map[string]*fakeUpstream{"fs": up}), up
}

func listedNames(t *testing.T, result []byte) []string {
	t.Helper()
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(result, &list); err != nil {
		t.Fatalf("list %s: %v", result, err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func resultText(t *testing.T, raw json.RawMessage) (string, bool) {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) != 1 {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r.Content[0].Text, r.IsError
}

func TestDeferredListsMetaToolsAndAlwaysGroups(t *testing.T) {
	p, _ := deferredProxy(t)
	st, _ := testSession(p, "dev", nil)
	got := strings.Join(listedNames(t, p.views.listFor(st)), ",")
	if got != "tool_search,call_tool,fs__list_directory" {
		t.Fatalf("deferred list = %s", got)
	}
	instr := p.own.deferredInstructions(st)
	for _, want := range []string{"## Deferred Tools", "<available-deferred-tools>\n", "fs__read_file - Read the complete contents of a file.",
		"fs__search_files - ", "</available-deferred-tools>"} {
		if !strings.Contains(instr, want) {
			t.Errorf("instructions lack %q:\n%s", want, instr)
		}
	}
	if strings.Contains(instr, "fs__write_file") || strings.Contains(instr, "fs__list_directory") {
		t.Errorf("instructions list a denied or already listed tool:\n%s", instr)
	}
}

func TestToolSearchBehaviour(t *testing.T) {
	p, _ := deferredProxy(t)
	ctx := context.Background()
	cases := []struct {
		name, args string
		want       string
		isError    bool
	}{
		{"empty query", `{"query":"  "}`, "query parameter is required", true},
		{"no query", `{}`, "query parameter is required", true},
		{"no match", `{"query":"kubernetes pods"}`, "No matching deferred tools found.", false},
		{"select with unknown and denied", `{"query":"select:fs__read_file,nope,fs__write_file","max_results":1}`,
			"<functions>\n<function>{\"name\": \"fs__read_file\", \"description\": \"Read the complete contents of a file.\", " +
				"\"parameters\": {\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}</function>\n</functions>\n\n" +
				"Not found: nope, fs__write_file", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := testSession(p, "dev", nil)
			res, werr := p.calls.forwardCall(ctx, reqFor(st, "tools/call", nil), "tool_search", json.RawMessage(c.args), nil)
			if werr != nil {
				t.Fatal(werr)
			}
			text, isErr := resultText(t, res)
			if text != c.want || isErr != c.isError {
				t.Fatalf("tool_search %s = %q (isError %v), want %q (%v)", c.args, text, isErr, c.want, c.isError)
			}
		})
	}
}

func TestToolSearchActivatesAndRespectsMax(t *testing.T) {
	p, _ := deferredProxy(t)
	st, _ := testSession(p, "dev", nil)
	res, _ := p.calls.forwardCall(context.Background(), reqFor(st, "tools/call", nil), "tool_search", json.RawMessage(`{"query":"file","max_results":1}`), nil)
	text, _ := resultText(t, res)
	if n := strings.Count(text, "<function>"); n != 1 {
		t.Fatalf("max_results 1 returned %d functions:\n%s", n, text)
	}
	if strings.Contains(text, "fs__write_file") {
		t.Fatal("a denied tool was returned")
	}
	names := listedNames(t, p.views.listFor(st))
	if len(names) != 4 {
		t.Fatalf("after one activation the list is %v", names)
	}
	// Another session of the same agent is not affected.
	other, _ := testSession(p, "dev", nil)
	if n := len(listedNames(t, p.views.listFor(other))); n != 3 {
		t.Fatalf("other session lists %d tools", n)
	}
}

func TestCallToolFollowsPolicy(t *testing.T) {
	p, up := deferredProxy(t)
	st, _ := testSession(p, "dev", nil)
	ctx := context.Background()
	res, werr := p.calls.forwardCall(ctx, reqFor(st, "tools/call", nil), "call_tool", json.RawMessage(`{"name":"fs__read_file","arguments":{"path":"/x","approved":true}}`), nil)
	if werr != nil {
		t.Fatal(werr)
	}
	if text, _ := resultText(t, res); text != "done" {
		t.Fatalf("call_tool result %q", text)
	}
	calls := up.requests()
	if len(calls) != 1 || calls[0].Params != `{"name":"read_file","arguments":{"path":"/x"}}` {
		t.Fatalf("upstream got %+v", calls)
	}
	res, _ = p.calls.forwardCall(ctx, reqFor(st, "tools/call", nil), "call_tool", json.RawMessage(`{"name":"fs__write_file","arguments":{}}`), nil)
	if text, isErr := resultText(t, res); !isErr || text != "tool 'fs__write_file' is denied by excluded_tools" {
		t.Fatalf("denied through call_tool: %q %v", text, isErr)
	}
	if _, werr := p.calls.forwardCall(ctx, reqFor(st, "tools/call", nil), "call_tool", json.RawMessage(`{"name":"nope"}`), nil); werr == nil || werr.Message != "unknown tool: nope" {
		t.Fatalf("unknown through call_tool: %v", werr)
	}
	// A granted tool that was never activated can still be called directly.
	if _, werr := p.calls.forwardCall(ctx, reqFor(st, "tools/call", nil), "fs__search_files", nil, nil); werr != nil {
		t.Fatalf("direct call of a deferred tool: %v", werr)
	}
}

func TestDynamicGroupInEagerMode(t *testing.T) {
	p, _ := deferredProxy(t)
	st, _ := testSession(p, "eager", nil)
	if got := strings.Join(listedNames(t, p.views.listFor(st)), ","); got != "tool_search,fs__read_file" {
		t.Fatalf("eager list with groups = %s", got)
	}
	if ownTool(st, "call_tool") {
		t.Fatal("call_tool offered in eager mode")
	}
	_, _ = p.calls.forwardCall(context.Background(), reqFor(st, "tools/call", nil), "tool_search", json.RawMessage(`{"query":"please SAVE my notes"}`), nil)
	if got := strings.Join(listedNames(t, p.views.listFor(st)), ","); !strings.Contains(got, "fs__write_file") {
		t.Fatalf("dynamic group not visible after a keyword query: %s", got)
	}
}
