package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/seal"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// askingUpstream is a fake 2026-07-28 upstream whose tool asks the client
// one question (key q) with state "up state #1", and answers with what it
// got once the retry carries both. A space and a # are outside a sealed
// state's alphabet: finding that state inside one can only mean it went
// out in clear.
func askingUpstream() *fakeUpstream {
	fx := connected(echoTool)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		state, _, _ := rawjson.Get(params, "requestState")
		ans, _, _ := rawjson.Get(params, "inputResponses")
		if string(state) == `"up state #1"` && len(ans) > 0 {
			text, _ := json.Marshal("got " + string(ans))
			return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`), nil
		}
		return json.RawMessage(`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create",` +
			`"params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"up state #1"}`), nil
	}
	return fx
}

// Any proxy holding the same sealing key takes a retry another one
// issued the state for; one with another key, or a retry with other
// arguments, is refused.
func TestPassedStateOpensWithTheSameKey(t *testing.T) {
	secret := []byte("a shared secret of thirty-two by")
	proxy := func(s *seal.Sealer) string {
		p := New(Options{Config: parseConfig(t, oneServerYAML), Upstreams: map[string]Upstream{"fx": askingUpstream()},
			Logger: zerolog.Nop(), Version: "test", StateSealer: s})
		p.Refresh()
		return startHTTP(t, p).URL + "/mcp"
	}
	s1, _ := seal.FromSecret(secret)
	s2, _ := seal.FromSecret(secret)
	first, second, other := proxy(s1), proxy(s2), proxy(nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	r1 := readModern(t, statelessCall(t, first, `{"name":"fx__echo","arguments":{"a":1},`+meta+`}`)[0])
	if _, ok := r1.Result.InputRequests["q"]; !ok || !isSealedState(r1.Result.RequestState) || strings.Contains(r1.Result.RequestState, "up state #1") {
		t.Fatalf("first round = %+v; want the upstream's key q and a sealed state", r1)
	}
	retry := func(url, args string) string {
		return statelessCall(t, url, `{"name":"fx__echo","arguments":`+args+`,"inputResponses":{"q":{"action":"accept","content":{}}},`+
			`"requestState":"`+r1.Result.RequestState+`",`+meta+`}`)[0]
	}
	if got := retry(second, `{"a":1}`); !strings.Contains(got, `got {\"q\":{\"action\":\"accept\"`) {
		t.Errorf("retry at another proxy with the same key = %s; want the upstream's result", got)
	}
	if got := retry(other, `{"a":1}`); !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, "invalid requestState") {
		t.Errorf("retry at a proxy with another key = %s; want -32602 invalid requestState", got)
	}
	if got := retry(first, `{"a":2}`); !strings.Contains(got, "invalid requestState: the arguments differ") {
		t.Errorf("retry with other arguments = %s; want it refused", got)
	}
}

// A call that needs approval is approved once: its later rounds, whose
// state proves the first was approved for these arguments, are not asked
// again.
func TestPassedRoundsAskApprovalOnce(t *testing.T) {
	p := New(Options{Config: parseConfig(t, supervisedYAML), Upstreams: map[string]Upstream{"fx": askingUpstream()},
		Logger: zerolog.Nop(), Version: "test"})
	p.Refresh()
	c := startStdio(t, p)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	approvals := 0
	call := func(id, extra string) modernResult {
		t.Helper()
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"fx__echo","arguments":{"a":1}` + extra + `,` + meta + `}}`)
		for {
			line := c.next()
			var m struct {
				ID     json.RawMessage
				Method string
			}
			_ = json.Unmarshal([]byte(line), &m)
			switch {
			case m.Method == "elicitation/create":
				approvals++
				c.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"decision":"approve"}}}`)
			case m.Method == "" && string(m.ID) == id:
				return readModern(t, line)
			}
		}
	}
	r1 := call("1", "")
	if _, ok := r1.Result.InputRequests["q"]; !ok || approvals != 1 {
		t.Fatalf("first round = %+v after %d approval questions; want the upstream's question after one", r1, approvals)
	}
	r2 := call("2", `,"inputResponses":{"q":{"action":"accept","content":{}}},"requestState":"`+r1.Result.RequestState+`"`)
	if len(r2.Result.Content) != 1 || !strings.HasPrefix(r2.Result.Content[0].Text, "got ") || approvals != 1 {
		t.Errorf("second round = %+v after %d approval questions; want the result, with no second question", r2, approvals)
	}
}

// The -32021 error names every capability a round's input requests need
// and the client lacks, in words and as requiredCapabilities.
func TestMissingCapabilityWire(t *testing.T) {
	for _, tc := range []struct {
		name        string
		m           missingCapability
		words, caps string
	}{
		{"sampling", missingCapability{sampling: true}, "sampling", `{"sampling":{}}`},
		{"form", missingCapability{elicitForm: true}, "elicitation", `{"elicitation":{}}`},
		{"url", missingCapability{elicitURL: true}, "URL-mode elicitation", `{"elicitation":{"url":{}}}`},
		{"all", missingCapability{sampling: true, elicitForm: true, elicitURL: true},
			"sampling and elicitation (form and URL mode)", `{"elicitation":{"form":{},"url":{}},"sampling":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.m.wire()
			if w.Code != -32021 || !strings.Contains(w.Message, "asked for "+tc.words+",") || string(w.Data) != `{"requiredCapabilities":`+tc.caps+`}` {
				t.Errorf("wire = %+v (data %s); want -32021 naming %q with %s", w, w.Data, tc.words, tc.caps)
			}
		})
	}
}

// An upstream round asking for several things the client lacks is
// refused naming all of them at once; roots are answered by the proxy.
func TestSortInputsNamesEveryMissingCapability(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected(echoTool)})
	raw := json.RawMessage(`{"resultType":"input_required","inputRequests":{` +
		`"a":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object"}}},` +
		`"b":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":"https://example.com","elicitationId":"e"}},` +
		`"c":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}},` +
		`"d":{"method":"roots/list"}}}`)
	_, err := p.relay.sortInputs("fx", clientCaps{}, raw)
	var mc *missingCapability
	if !errors.As(err, &mc) || mc.need() != `{"elicitation":{"form":{},"url":{}},"sampling":{}}` {
		t.Errorf("sortInputs = %v; want every missing capability named", err)
	}
	sorted, err := p.relay.sortInputs("fx", clientCaps{sampling: true, elicitation: true, elicitationURL: true}, raw)
	if err != nil || len(sorted.toClient) != 3 || string(sorted.own["d"]) != `{"roots":[]}` {
		t.Errorf("sortInputs = %+v, %v; want a, b, c to the client and d answered by the proxy", sorted, err)
	}
	if !strings.Contains(string(sorted.toClient["c"]), `"maxTokens":5`) {
		t.Errorf("sampling request = %s", sorted.toClient["c"])
	}
}
