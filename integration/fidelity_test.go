package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// fidelityCase is one tool call compared between the proxy and a direct
// connection to the same upstream.
type fidelityCase struct {
	name   string // subtest and golden file name
	server string // proxy server name, also the key of the direct client
	tool   string
	args   string // raw JSON arguments; "{{dir}}" is replaced by the filesystem dir
	// golden is true when the result is deterministic: the direct result must
	// equal testdata/golden/<name>.json too.
	golden bool
	// volatile is true when the upstream puts the wall-clock time into the
	// result: the proxy's and the direct bytes are compared with the times
	// masked (everything else byte for byte).
	volatile bool
}

var fidelityCases = []fidelityCase{
	{name: "everything_echo_text", server: "everything", tool: "echo", args: `{"message":"fidelity ✓ <&> \"quoted\""}`, golden: true},
	{name: "everything_get_sum", server: "everything", tool: "get-sum", args: `{"a":2,"b":3}`, golden: true},
	{name: "everything_tiny_image", server: "everything", tool: "get-tiny-image", golden: true},
	{name: "everything_resource_links", server: "everything", tool: "get-resource-links", args: `{"count":4}`, golden: true},
	{name: "everything_resource_text", server: "everything", tool: "get-resource-reference", args: `{"resourceType":"Text","resourceId":3}`, volatile: true},
	{name: "everything_resource_blob", server: "everything", tool: "get-resource-reference", args: `{"resourceType":"Blob","resourceId":2}`, volatile: true},
	{name: "everything_structured", server: "everything", tool: "get-structured-content", args: `{"location":"Chicago"}`, golden: true},
	{name: "everything_annotated", server: "everything", tool: "get-annotated-message", args: `{"messageType":"success","includeImage":true}`, golden: true},
	{name: "evhttp_echo_text", server: "evhttp", tool: "echo", args: `{"message":"over streamable http"}`, golden: true},
	{name: "evhttp_tiny_image", server: "evhttp", tool: "get-tiny-image", golden: true},
	{name: "evhttp_resource_blob", server: "evhttp", tool: "get-resource-reference", args: `{"resourceType":"Blob","resourceId":7}`, volatile: true},
	{name: "filesystem_read_text_file", server: "filesystem", tool: "read_text_file", args: `{"path":"{{dir}}/notes.txt"}`, golden: true},
	{name: "filesystem_read_media_file_wav", server: "filesystem", tool: "read_media_file", args: `{"path":"{{dir}}/tone.wav"}`, golden: true},
	{name: "filesystem_list_directory", server: "filesystem", tool: "list_directory", args: `{"path":"{{dir}}"}`, golden: true},
	{name: "filesystem_list_allowed_directories", server: "filesystem", tool: "list_allowed_directories"},
	{name: "filesystem_read_missing_file", server: "filesystem", tool: "read_text_file", args: `{"path":"{{dir}}/missing.txt"}`},
	{name: "fx_echo", server: "fx", tool: "echo", args: `{"text":"fixture text"}`, golden: true},
	{name: "fx_tool_error", server: "fx", tool: "tool_error", golden: true},
}

// TestGoldenFidelity: for text, image, audio, resource_link, embedded text and
// blob resources and structuredContent, the proxied tools/call result is the
// upstream's own result, byte for byte (blobs: passthrough), over stdio and
// Streamable HTTP, from stdio and HTTP upstreams.
func TestGoldenFidelity(t *testing.T) {
	t.Parallel()
	dir := fsFixtureDir(t)
	directs := map[string]rawClient{
		"everything": directStdio(t, "server-everything (direct)", nodeBin, everythingJS, "stdio"),
		"evhttp":     directHTTP(t, everythingHTTP(t)),
		"filesystem": directStdio(t, "server-filesystem (direct)", nodeBin, filesystemJS, dir),
		"fx":         directStdio(t, "fixture (direct)", fixtureBin, "-no-weird"),
	}
	cfg := mergedConfig(t, dir, "-no-weird")

	proxies := map[string]rawClient{}
	stdio := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, stdio)
	proxies["stdio"] = stdio
	url, _ := startHTTPProxy(t, cfg)
	proxies["http"] = directHTTP(t, url)
	for _, p := range proxies {
		rawResult(t, p, "tools/list", "") // waits for every upstream (startup_wait)
	}

	t.Run("tools/list", func(t *testing.T) {
		for tr, proxy := range proxies {
			_, proxied := toolsOf(t, rawResult(t, proxy, "tools/list", ""))
			for server, direct := range directs {
				names, tools := toolsOf(t, rawResult(t, direct, "tools/list", ""))
				for _, name := range names {
					checkToolBytes(t, tr, server, name, tools[name], proxied[server+"__"+name])
				}
			}
		}
	})
	for _, fc := range fidelityCases {
		t.Run(fc.name, func(t *testing.T) {
			args := string(bytes.ReplaceAll([]byte(fc.args), []byte("{{dir}}"), []byte(dir)))
			want := rawResult(t, directs[fc.server], "tools/call", callParams(fc.tool, args))
			if fc.golden {
				checkGolden(t, fc.name, want)
			}
			if fc.volatile && bytes.Equal(maskTimes(t, want), want) {
				t.Errorf("%s: no clock time found to mask in %s", fc.name, want)
			}
			for _, tr := range []string{"stdio", "http"} {
				got := rawResult(t, proxies[tr], "tools/call", callParams(fc.server+"__"+fc.tool, args))
				if fc.volatile {
					got, want = maskTimes(t, got), maskTimes(t, want)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s over %s: the proxied result differs from the direct one\n proxy:  %s\n direct: %s",
						fc.server+"__"+fc.tool, tr, tail(string(got), 1500), tail(string(want), 1500))
				}
			}
		})
	}
}

// checkToolBytes checks that a proxied tool object is the upstream's with
// only the name replaced.
func checkToolBytes(t *testing.T, tr, server, name string, direct, proxied json.RawMessage) {
	t.Helper()
	exposed := server + "__" + name
	if proxied == nil {
		t.Errorf("%s: tools/list lacks %s", tr, exposed)
		return
	}
	want := bytes.Replace(direct, []byte(`"name":`+strconv.Quote(name)), []byte(`"name":`+strconv.Quote(exposed)), 1)
	if bytes.Equal(want, direct) {
		t.Fatalf("%s: cannot find the name member in %s", server, direct)
	}
	if !bytes.Equal(proxied, want) {
		t.Errorf("%s: %s is not the upstream's tool object with the name replaced\n proxy:  %s\n direct: %s", tr, exposed, proxied, want)
	}
}

// checkGolden compares got with testdata/golden/<name>.json, or rewrites
// the file under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(append([]byte(nil), got...), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run the tests with -update to create it)", err)
	}
	if !bytes.Equal(got, bytes.TrimSuffix(want, []byte("\n"))) {
		t.Errorf("the direct result differs from %s (was the upstream upgraded? rerun with -update after checking):\n got:  %s\n want: %s",
			path, tail(string(got), 1500), tail(string(want), 1500))
	}
}

// clockTime matches the times server-everything writes into its dynamic
// resources ("created at 2:40:34 PM"; newer ICU puts U+202F before PM).
var clockTime = regexp.MustCompile(`\d{1,2}:\d{2}:\d{2}(\s|\x{202F}|\\u202[fF])?[AP]M`)

// blobMember matches a base64 "blob" member.
var blobMember = regexp.MustCompile(`"blob":"([A-Za-z0-9+/=]*)"`)

// maskTimes replaces clock times in raw, including inside base64 blobs
// (decoded, masked, encoded again), and leaves every other byte alone.
func maskTimes(t *testing.T, raw []byte) []byte {
	t.Helper()
	out := blobMember.ReplaceAllFunc(raw, func(m []byte) []byte {
		b64 := blobMember.FindSubmatch(m)[1]
		dec, err := base64.StdEncoding.DecodeString(string(b64))
		if err != nil {
			t.Errorf("blob is not base64: %v", err)
			return m
		}
		masked := clockTime.ReplaceAll(dec, []byte("<time>"))
		return []byte(`"blob":"` + base64.StdEncoding.EncodeToString(masked) + `"`)
	})
	return clockTime.ReplaceAll(out, []byte("<time>"))
}

// TestFixturePassthrough: the fixture's probes, which no typed client can
// decode, pass through byte for byte (raw client): the weird_schema tool
// object differs from the upstream's only in its name, and the all_content
// result (unknown content type, big integers, _meta, unknown top-level member)
// is identical, from a stdio upstream and a Streamable HTTP one that answers
// with event streams, over stdio and Streamable HTTP downstream.
func TestFixturePassthrough(t *testing.T) {
	t.Parallel()
	fxURL := startFixtureHTTP(t, "-sse-responses")
	directs := map[string]rawClient{
		"fx":  directStdio(t, "fixture (direct)", fixtureBin),
		"fxh": directHTTP(t, fxURL),
	}
	cfg := writeConfig(t, "blobs: {mode: passthrough}\n",
		fixtureServer("fx", nil),
		httpServer("fxh", fxURL),
	)
	proxies := map[string]rawClient{}
	stdio := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, stdio)
	proxies["stdio"] = stdio
	url, _ := startHTTPProxy(t, cfg)
	proxies["http"] = directHTTP(t, url)

	for server, direct := range directs {
		_, directTools := toolsOf(t, rawResult(t, direct, "tools/list", ""))
		wantTool := directTools["weird_schema"]
		if wantTool == nil {
			t.Fatalf("%s lists no weird_schema", server)
		}
		if !bytes.Contains(wantTool, []byte("1e400")) {
			t.Fatalf("%s: weird_schema lost its probes: %s", server, wantTool)
		}
		wantAll := rawResult(t, direct, "tools/call", callParams("all_content", ""))
		if !bytes.Contains(wantAll, []byte(`"x-future"`)) || !bytes.Contains(wantAll, []byte("12345678901234567890")) {
			t.Fatalf("%s: all_content lost its probes: %s", server, wantAll)
		}
		for tr, proxy := range proxies {
			_, tools := toolsOf(t, rawResult(t, proxy, "tools/list", ""))
			checkToolBytes(t, tr, server, "weird_schema", wantTool, tools[server+"__weird_schema"])
			gotAll := rawResult(t, proxy, "tools/call", callParams(server+"__all_content", ""))
			if !bytes.Equal(gotAll, wantAll) {
				t.Errorf("%s: %s__all_content result differs from the upstream's\n proxy:  %s\n direct: %s", tr, server, gotAll, wantAll)
			}
		}
	}
}

// TestLargeResultPassthrough: a 6 MiB text result (the fixture's echo padded
// with -payload-bytes) arrives whole and byte for byte, over stdio and
// Streamable HTTP.
func TestLargeResultPassthrough(t *testing.T) {
	t.Parallel()
	const size = 6 << 20
	args := []string{"-no-weird", "-payload-bytes", strconv.Itoa(size)}
	direct := directStdio(t, "fixture (direct)", fixtureBin, args...)
	want := rawResult(t, direct, "tools/call", callParams("echo", `{"text":"big"}`))
	if len(want) < size {
		t.Fatalf("the fixture's padded echo is only %d bytes", len(want))
	}
	cfg := writeConfig(t, "blobs: {mode: passthrough}\n", fixtureServer("fx", args))
	stdio := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, stdio)
	url, _ := startHTTPProxy(t, cfg)
	for tr, c := range map[string]rawClient{"stdio": stdio, "http": directHTTP(t, url)} {
		got := rawResult(t, c, "tools/call", callParams("fx__echo", `{"text":"big"}`))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the %d-byte result came through as %d different bytes", tr, len(want), len(got))
		}
	}
}
