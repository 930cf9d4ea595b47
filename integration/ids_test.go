package integration

import (
	"bytes"
	"fmt"
	"testing"
)

// TestRequestIDsEchoed: JSON-RPC 2.0 says a response carries the same id as
// its request. Through the proxy (stdio, raw client) string ids and integers
// too large for a float64 come back as sent, for the requests the proxy
// answers itself (tools/list, tools/call) and for those it leaves to its MCP
// library (ping); two calls in flight whose ids differ only beyond float64
// precision each get their own answer.
func TestRequestIDsEchoed(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "blobs: {mode: passthrough}\n", fixtureServer("fx", []string{"-no-weird"}))
	c := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	rawInit(t, c)
	requests := map[string]string{
		"tools/list": `"method":"tools/list"`,
		"tools/call": `"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"id"}}`,
		"ping":       `"method":"ping"`,
	}
	for _, name := range []string{"tools/list", "tools/call", "ping"} {
		for _, id := range []string{`"str-id-1"`, `""`, `9007199254740993`, `12345678901234567890`} {
			m := c.exchange(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,%s}`, id, requests[name]))[0]
			if m.Error != nil {
				t.Errorf("%s with id %s: error %d %s", name, id, m.Error.Code, m.Error.Message)
			}
			if string(m.ID) != id {
				t.Errorf("%s with id %s: the response has id %s", name, id, m.ID)
			}
		}
	}

	slow := `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"fx__sleep","arguments":{"ms":300}}}`
	fast := `{"jsonrpc":"2.0","id":12345678901234567891,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"fast"}}}`
	got := map[string][]byte{}
	for _, m := range c.exchange(t, slow, fast) {
		got[string(m.ID)] = m.Result
	}
	if r := got["12345678901234567890"]; !bytes.Contains(r, []byte(`"slept"`)) {
		t.Errorf("the sleep call (id 12345678901234567890) got no answer with its id; answers by id: %q", got)
	}
	if r := got["12345678901234567891"]; !bytes.Contains(r, []byte(`"fast"`)) {
		t.Errorf("the echo call (id 12345678901234567891) got no answer with its id; answers by id: %q", got)
	}
}
