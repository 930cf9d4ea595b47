package integration

import (
	"encoding/base64"
	"fmt"
	"testing"
)

// TestWireStaysValid: the proxy writes valid JSON-RPC whatever its peers
// send. Through the built binary over stdio, with the fixture answering
// with the bytes a test gives it: a result that is not an object is -32603
// naming the server; ill-formed UTF-8 in a result reaches the client as
// U+FFFD, every other byte as sent; a client line that is not UTF-8 is
// refused with -32600 and id null; a batch on a 2025-11-25 session is
// refused with -32600 saying why.
func TestWireStaysValid(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "blobs: {mode: passthrough}\n", fixtureServer("fx", []string{"-no-weird", "-raw-result"}))
	c := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)
	call := func(id int, result string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__raw_result","arguments":{"base64":%q}}}`,
			id, base64.StdEncoding.EncodeToString([]byte(result)))
	}
	for _, tt := range []struct{ name, line, want string }{
		{"null result", call(101, "null"),
			`{"jsonrpc":"2.0","id":101,"error":{"code":-32603,"message":"upstream \"fx\" returned an invalid tools/call result: null"}}`},
		{"array result", call(102, `[{"type":"text","text":"x"}]`),
			`{"jsonrpc":"2.0","id":102,"error":{"code":-32603,"message":"upstream \"fx\" returned an invalid tools/call result: [{\"type\":\"text\",\"text\":\"x\"}]"}}`},
		{"ill-formed UTF-8", call(103, "{\"content\":[{\"type\":\"text\",\"text\":\"caf\xc3 \xe2\x82 \\ud800 \xff\"}], \"n\":1.50}"),
			"{\"jsonrpc\":\"2.0\",\"id\":103,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"caf\uFFFD \uFFFD \\ud800 \uFFFD\"}], \"n\":1.50}}"},
		{"client id not UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: the message is not valid UTF-8, as JSON text must be (RFC 8259 section 8.1)"}}`},
		{"batch on 2025-11-25", `[{"jsonrpc":"2.0","id":104,"method":"ping"}]`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported in MCP protocol version 2025-11-25 (removed in 2025-06-18)"}}`},
	} {
		if got := string(c.exchange(t, tt.line)[0].Raw); got != tt.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.name, got, tt.want)
		}
	}
}
