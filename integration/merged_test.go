package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fsFixtureDir makes the directory server-filesystem serves: a text file and
// a small .wav file.
func fsFixtureDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(notesText), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tone.wav"), toneWAV(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const notesText = "Integration notes.\nLine two: café ✓\n"

// toneWAV is a deterministic 8-bit mono 8 kHz WAV file of 64 samples.
func toneWAV() []byte {
	const samples = 64
	data := make([]byte, samples)
	for i := range data {
		data[i] = byte(128 + (i%16-8)*12)
	}
	le32 := func(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	le16 := func(v int) []byte { return []byte{byte(v), byte(v >> 8)} }
	var b []byte
	b = append(b, "RIFF"...)
	b = append(b, le32(36+samples)...)
	b = append(b, "WAVEfmt "...)
	b = append(b, le32(16)...)
	b = append(b, le16(1)...)    // PCM
	b = append(b, le16(1)...)    // mono
	b = append(b, le32(8000)...) // sample rate
	b = append(b, le32(8000)...) // byte rate
	b = append(b, le16(1)...)    // block align
	b = append(b, le16(8)...)    // bits per sample
	b = append(b, "data"...)
	b = append(b, le32(samples)...)
	return append(b, data...)
}

// mergedConfig is the four-upstream config of the merged and fidelity
// tests: server-everything on stdio and on Streamable HTTP, server-filesystem
// on dir, and the fixture (args).
func mergedConfig(t testing.TB, dir string, fixtureArgs ...string) string {
	t.Helper()
	return writeConfig(t, "blobs: {mode: passthrough}\n",
		everythingServer("everything"),
		httpServer("evhttp", everythingHTTP(t)),
		filesystemServer("filesystem", dir),
		fixtureServer("fx", fixtureArgs),
	)
}

// TestMergedToolsAndCalls: one proxy in front of server-everything (stdio and
// Streamable HTTP), server-filesystem and the fixture, used by the official
// Go SDK client over stdio and over Streamable HTTP. The merged list holds
// every server's tools under <server>__<tool>, and calls reach the right
// server.
func TestMergedToolsAndCalls(t *testing.T) {
	t.Parallel()
	dir := fsFixtureDir(t)

	// What each upstream lists when the same client talks to it directly.
	direct := map[string][]*mcp.Tool{
		"everything": listTools(t, sdkDirectStdio(t, nodeBin, everythingJS, "stdio")),
		"filesystem": listTools(t, sdkDirectStdio(t, nodeBin, filesystemJS, dir)),
		"fx":         listTools(t, sdkDirectStdio(t, fixtureBin, "-no-weird", "-page", "5")),
	}
	opts, sopts := directOpts(t)
	t.Logf("the proxy declares these client capabilities upstream, and so does the direct client: %s", jsonOf(t, opts.Capabilities))
	direct["evhttp"] = listTools(t, sdkHTTP(t, everythingHTTP(t), opts, sopts))
	for server, tools := range direct {
		if len(tools) == 0 {
			t.Fatalf("direct listing of %s is empty", server)
		}
	}

	cfg := mergedConfig(t, dir, "-no-weird", "-page", "5") // the fixture lists in pages of 5
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			cs := connectFor(t, tr, cfg, nil, "")
			checkMergedList(t, listTools(t, cs), direct)
			checkMergedCalls(t, cs, dir)
		})
	}
}

// proxyOwnTool names the proxy's own tools: mcp_resources and mcp_prompts
// are listed whenever a granted server offers resources or prompts
// (docs/resources.md#resources-and-prompts); tool_search and call_tool in deferred mode.
var proxyOwnTool = map[string]bool{"mcp_resources": true, "mcp_prompts": true, "tool_search": true, "call_tool": true}

func checkMergedList(t *testing.T, merged []*mcp.Tool, direct map[string][]*mcp.Tool) {
	t.Helper()
	var upstreamTools []*mcp.Tool
	for _, tool := range merged {
		if !proxyOwnTool[tool.Name] {
			upstreamTools = append(upstreamTools, tool)
		}
	}
	merged = upstreamTools
	names := toolNames(merged)
	for _, want := range []string{
		"everything__echo", "everything__get-sum", "everything__get-tiny-image",
		"evhttp__echo", "evhttp__get-structured-content",
		"filesystem__read_text_file", "filesystem__read_media_file", "filesystem__list_allowed_directories",
		"fx__echo", "fx__rpc_error",
	} {
		if !hasName(names, want) {
			t.Errorf("merged tools/list lacks %s; it has %v", want, names)
		}
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range merged {
		byName[tool.Name] = tool
	}
	total := 0
	for server, tools := range direct {
		total += len(tools)
		got := 0
		for _, n := range names {
			if strings.HasPrefix(n, server+"__") {
				got++
			}
		}
		if got != len(tools) {
			t.Errorf("%s: %d tools through the proxy, %d listed directly", server, got, len(tools))
		}
		for _, d := range tools {
			p, ok := byName[server+"__"+d.Name]
			if !ok {
				t.Errorf("%s's tool %s is not listed as %s__%s", server, d.Name, server, d.Name)
				continue
			}
			if p.Description != d.Description || p.Title != d.Title {
				t.Errorf("%s__%s: description/title %q/%q, directly %q/%q", server, d.Name, p.Description, p.Title, d.Description, d.Title)
			}
			if a, b := jsonOf(t, p.InputSchema), jsonOf(t, d.InputSchema); a != b {
				t.Errorf("%s__%s: input schema differs from the direct one:\n proxy:  %s\n direct: %s", server, d.Name, a, b)
			}
			if a, b := jsonOf(t, p.OutputSchema), jsonOf(t, d.OutputSchema); a != b {
				t.Errorf("%s__%s: output schema differs from the direct one:\n proxy:  %s\n direct: %s", server, d.Name, a, b)
			}
			if a, b := jsonOf(t, p.Annotations), jsonOf(t, d.Annotations); a != b {
				t.Errorf("%s__%s: annotations %s, directly %s", server, d.Name, a, b)
			}
		}
	}
	if len(merged) != total {
		t.Errorf("merged tools/list has %d tools, the upstreams list %d in all: %v", len(merged), total, names)
	}
}

func checkMergedCalls(t *testing.T, cs *mcp.ClientSession, dir string) {
	t.Helper()
	if got := contentText(callTool(t, cs, "everything__echo", map[string]any{"message": "hello proxy"})); got != "Echo: hello proxy" {
		t.Errorf("everything__echo: %q", got)
	}
	if got := contentText(callTool(t, cs, "everything__get-sum", map[string]any{"a": 2, "b": 3})); got != "The sum of 2 and 3 is 5." {
		t.Errorf("everything__get-sum: %q", got)
	}
	if got := contentText(callTool(t, cs, "evhttp__echo", map[string]any{"message": "over http"})); got != "Echo: over http" {
		t.Errorf("evhttp__echo: %q", got)
	}
	if got := contentText(callTool(t, cs, "evhttp__get-sum", map[string]any{"a": 40, "b": 2})); got != "The sum of 40 and 2 is 42." {
		t.Errorf("evhttp__get-sum: %q", got)
	}
	res := callTool(t, cs, "filesystem__read_text_file", map[string]any{"path": filepath.Join(dir, "notes.txt")})
	if got := contentText(res); got != notesText {
		t.Errorf("filesystem__read_text_file: %q, want %q", got, notesText)
	}
	if got, want := structured(t, res), jsonOf(t, map[string]string{"content": notesText}); got != want {
		t.Errorf("filesystem__read_text_file structuredContent: %s, want %s", got, want)
	}
	res = callTool(t, cs, "fx__echo", map[string]any{"text": "hi fixture"})
	if got := contentText(res); got != "hi fixture" {
		t.Errorf("fx__echo: %q", got)
	}
	if got := structured(t, res); got != `{"echo":"hi fixture"}` {
		t.Errorf("fx__echo structuredContent: %s", got)
	}
}

// jsonOf marshals v (nil stays "null").
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
