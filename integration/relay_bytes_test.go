package integration

import (
	"encoding/json"
	"strconv"
	"testing"
)

// relayParams are a sampling request's params that a re-encoding would
// change: '<' and '&' (HTML-escaped by encoding/json), an integer beyond
// 2^53 (rounded through float64), keys out of order (sorted through a map).
// maxTokens is under the default cap, so the proxy rewrites nothing.
const relayParams = `{"messages":[{"role":"user","content":{"type":"text","text":"<b>huge</b> & co"}}],"maxTokens":64,"metadata":{"n":18446744073709551615,"z":1,"a":2}}`

// relayResult is the client's answer, with the same traps.
const relayResult = `{"role":"assistant","content":{"type":"text","text":"<i>ok</i>"},"model":"m","_meta":{"n":18446744073709551615,"z":1,"a":2}}`

// TestRelaySamplingBytes: a sampling request of the fixture reaches a raw
// stdio client of the proxy with its params as the fixture wrote them, and
// the client's result reaches the fixture as the client wrote it, whether
// the fixture is on stdio, on Streamable HTTP sending the request on the
// call's SSE response, or on Streamable HTTP sending it on the GET stream.
func TestRelaySamplingBytes(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "",
		fixtureServer("fx", []string{"-no-weird"}),
		httpServer("fxpost", startFixtureHTTP(t, "-no-weird", "-sse-responses")),
		httpServer("fxget", startFixtureHTTP(t, "-no-weird", "-get-stream")))
	c := startStdioRaw(t, "mcp-proxy (stdio)", proxyCmd("serve", "--config", cfg))
	c.write(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"1"}}}`))
	c.await(t, "the initialize response", func(m *rpcMsg) bool { return m.isResponseTo(1) })
	c.write(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))

	for i, srv := range []string{"fx", "fxpost", "fxget"} {
		t.Run(srv, func(t *testing.T) {
			id := strconv.Itoa(100 + i)
			// The params travel to the fixture as a JSON string, whose text
			// survives the encoding/json pass tool arguments get on their
			// way upstream ('<' becomes \u003c there).
			arg, _ := json.Marshal(relayParams)
			c.write(t, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+srv+`__sample","arguments":{"params":`+string(arg)+`}}}`))
			req := c.await(t, "the sampling request", func(m *rpcMsg) bool { return m.Method == "sampling/createMessage" })
			if string(req.Params) != relayParams {
				t.Errorf("the client got params\n%s\nwant, as the server sent them,\n%s", req.Params, relayParams)
			}
			c.write(t, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+relayResult+`}`))
			resp := c.await(t, "the tools/call response", func(m *rpcMsg) bool { return m.isResponseTo(100 + i) })
			var res struct {
				Content []struct{ Text string }
				IsError bool
			}
			if err := json.Unmarshal(resp.Result, &res); err != nil || len(res.Content) != 1 {
				t.Fatalf("tools/call: %s (%v)", resp.Raw, err)
			}
			if res.IsError || res.Content[0].Text != relayResult {
				t.Errorf("the server got the result\n%s\nwant, as the client sent it,\n%s", res.Content[0].Text, relayResult)
			}
		})
	}
}
