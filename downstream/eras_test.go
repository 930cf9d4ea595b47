package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// The tests in this file put the official Go SDK's conformance
// everything-server (the go-sdk version of go.mod), which speaks both
// protocol eras, behind a proxy as a real stdio upstream, and drive the
// proxy as clients of each era.

// everythingBin builds the everything-server into t's temporary directory
// (the build cache makes every build after the first a link).
func everythingBin(t *testing.T) string {
	t.Helper()
	root, err := testproc.ModuleRoot("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "everything-server")
	if err := testproc.Build(root, bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server", false, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	return bin
}

// everythingProxy starts the everything-server over stdio speaking
// protocol (its tools exposed as ev__<name>) and returns a proxy with it.
func everythingProxy(t *testing.T, protocol string) *Proxy {
	t.Helper()
	bin := everythingBin(t)
	cfg := parseConfig(t, fmt.Sprintf(`
startup_wait: 2s
blobs:
  mode: passthrough
servers:
  ev:
    command: %s
    protocol: %q
    timeout: 20s
    env:
      HOME: %s
    roots:
      - uri: file:///srv/configured
        name: configured
`, bin, protocol, t.TempDir()))
	var p *Proxy
	conn := upstream.New(cfg.Servers["ev"], upstream.Options{Logger: zerolog.Nop(),
		OnRequest: func(ctx context.Context, srv, method string, params json.RawMessage) (json.RawMessage, error) {
			return p.OnUpstreamRequest(ctx, srv, method, params)
		},
		OnNotification: func(srv, method string, params json.RawMessage) { p.OnUpstreamNotification(srv, method, params) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = conn.Close() })
	p = New(Options{Config: cfg, Upstreams: map[string]Upstream{"ev": conn}, Logger: zerolog.Nop(), Version: "test"})
	conn.Start(ctx)
	for deadline := time.Now().Add(30 * time.Second); conn.Snapshot().State != upstream.StateConnected; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the everything-server did not connect: %v", conn.Snapshot().Err)
		}
	}
	if v := conn.Snapshot().ProtocolVersion; v != protocol {
		t.Fatalf("the everything-server speaks %s, want %s", v, protocol)
	}
	p.Refresh()
	return p
}

// modernResult is the result of a 2026-07-28 reply, read.
type modernResult struct {
	Result struct {
		ResultType    string
		InputRequests map[string]struct {
			Method string
			Params json.RawMessage
		}
		RequestState string
		Content      []struct{ Text string }
		IsError      bool
	}
	Error *wireError
}

func readModern(t *testing.T, msg string) modernResult {
	t.Helper()
	var m modernResult
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		t.Fatalf("reply %s: %v", msg, err)
	}
	return m
}

// A 2026-07-28 client of a 2026-07-28 upstream: the upstream's input
// requests reach the client under the upstream's own keys, round after
// round, each round with a new sealed state that hides the upstream's; the
// retry carries the client's answers and the upstream's state to the
// upstream; a changed state is refused.
func TestModernClientModernServerPassesInputs(t *testing.T) {
	p := everythingProxy(t, "2026-07-28")
	url := startHTTP(t, p).URL + "/mcp"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	call := func(extra string) modernResult {
		t.Helper()
		msgs := statelessCall(t, url, `{"name":"ev__test_input_required_result_multi_round","arguments":{}`+extra+`,`+meta+`}`)
		return readModern(t, msgs[len(msgs)-1])
	}

	r1 := call("")
	step1, ok := r1.Result.InputRequests["step1"]
	if r1.Result.ResultType != "input_required" || !ok || step1.Method != "elicitation/create" || len(r1.Result.InputRequests) != 1 {
		t.Fatalf("first round = %+v; want input_required asking step1 by elicitation", r1)
	}
	if !isSealedState(r1.Result.RequestState) {
		t.Errorf("requestState %q is not the proxy's sealed state", r1.Result.RequestState)
	}
	r2 := call(`,"inputResponses":{"step1":{"action":"accept","content":{"name":"Ada"}}},"requestState":"` + r1.Result.RequestState + `"`)
	if _, ok := r2.Result.InputRequests["step2"]; r2.Result.ResultType != "input_required" || !ok {
		t.Fatalf("second round = %+v; want step2 (the upstream got the state of round 1)", r2)
	}
	if r2.Result.RequestState == r1.Result.RequestState || !isSealedState(r2.Result.RequestState) {
		t.Errorf("round 2's state %q; want a new sealed state", r2.Result.RequestState)
	}
	tampered := []byte(r2.Result.RequestState)
	tampered[len(tampered)/2] ^= 1
	if r := call(`,"inputResponses":{"step2":{"action":"accept","content":{"color":"blue"}}},"requestState":"` + string(tampered) + `"`); r.Error == nil ||
		r.Error.Code != codeInvalidParams || !strings.Contains(r.Error.Message, "invalid requestState") {
		t.Errorf("tampered state: %+v; want -32602 invalid requestState", r)
	}
	r3 := call(`,"inputResponses":{"step2":{"action":"accept","content":{"color":"blue"}}},"requestState":"` + r2.Result.RequestState + `"`)
	if r3.Result.ResultType != "complete" || len(r3.Result.Content) != 1 || r3.Result.Content[0].Text != "Multi-round complete: Ada likes blue" {
		t.Errorf("last round = %+v; want the upstream's result for Ada and blue", r3)
	}

	// The same over stdio, where the retry's inputResponses and
	// requestState must reach the upstream too.
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ev__test_input_required_result_request_state","arguments":{},` + meta + `}}`)
	s1 := readModern(t, c.recv(`1`))
	if _, ok := s1.Result.InputRequests["confirm"]; !ok || !isSealedState(s1.Result.RequestState) {
		t.Fatalf("stdio first round = %+v", s1)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ev__test_input_required_result_request_state","arguments":{},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"` + s1.Result.RequestState + `",` + meta + `}}`)
	if s2 := readModern(t, c.recv(`2`)); len(s2.Result.Content) != 1 || !strings.HasPrefix(s2.Result.Content[0].Text, "state-ok") {
		t.Errorf("stdio last round = %+v; want state-ok (the upstream got its own state back)", s2)
	}
}

// Passing a 2026-07-28 upstream's input requests on, the proxy answers
// roots/list itself for a client without roots (the server's configured
// roots), and refuses with -32021 a call whose upstream asks for a
// capability the client did not declare.
func TestModernClientModernServerCapabilities(t *testing.T) {
	p := everythingProxy(t, "2026-07-28")
	url := startHTTP(t, p).URL + "/mcp"
	withCaps := func(caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	msgs := statelessCall(t, url, `{"name":"ev__test_input_required_result_list_roots","arguments":{},`+withCaps(`{}`)+`}`)
	if r := readModern(t, msgs[len(msgs)-1]); len(r.Result.Content) != 1 || r.Result.Content[0].Text != "Client exposed 1 root(s): file:///srv/configured" {
		t.Errorf("roots for a client without roots = %s; want the configured root, answered by the proxy", msgs[len(msgs)-1])
	}
	for _, tc := range []struct{ tool, caps, need string }{
		{"test_input_required_result_elicitation", `{"sampling":{}}`, `{"elicitation":{}}`},
		{"test_input_required_result_sampling", `{"elicitation":{}}`, `{"sampling":{}}`},
	} {
		msgs := statelessCall(t, url, `{"name":"ev__`+tc.tool+`","arguments":{},`+withCaps(tc.caps)+`}`)
		want := `"error":{"code":-32021,`
		if got := msgs[len(msgs)-1]; !strings.Contains(got, want) || !strings.Contains(got, `"data":{"requiredCapabilities":`+tc.need+`}`) {
			t.Errorf("%s with %s = %s; want -32021 with requiredCapabilities %s", tc.tool, tc.caps, got, tc.need)
		}
	}
}

// sessionClient initializes a 2025-11-25 stdio session declaring caps.
func sessionClient(t *testing.T, p *Proxy, caps string) *stdioClient {
	t.Helper()
	c := startStdio(t, p)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps +
		`,"clientInfo":{"name":"test","version":"1"}}}`)
	c.recv(`0`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// callAnswering sends a tools/call with id 1 and answers the proxy's
// requests on the way with answer (by method) until the call's response,
// which it returns with the methods asked, in order.
func (c *stdioClient) callAnswering(params string, answer map[string]string) (string, []string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`)
	var asked []string
	for {
		line := c.next()
		var m struct {
			ID     json.RawMessage
			Method string
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			c.t.Fatalf("line %s: %v", line, err)
		}
		switch {
		case m.Method != "" && m.ID != nil:
			asked = append(asked, m.Method)
			res, ok := answer[m.Method]
			if !ok {
				c.t.Fatalf("unexpected request %s", line)
			}
			c.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + res + `}`)
		case m.Method == "" && string(m.ID) == "1":
			return line, asked
		}
	}
}

// A 2025-11-25 session client of a 2026-07-28 upstream: each of the
// upstream's input requests becomes the matching request to the client,
// round after round, and the client gets the upstream's result.
func TestSessionClientModernServer(t *testing.T) {
	p := everythingProxy(t, "2026-07-28")
	c := sessionClient(t, p, `{"elicitation":{},"sampling":{},"roots":{}}`)
	got, asked := c.callAnswering(`{"name":"ev__test_input_required_result_multi_round","arguments":{}}`, map[string]string{
		"elicitation/create": `{"action":"accept","content":{"name":"Ada","color":"blue"}}`,
	})
	if !strings.Contains(got, `"text":"Multi-round complete: Ada likes blue"`) || len(asked) != 2 {
		t.Errorf("multi-round call = %s after asking %v; want two elicitations, then the result", got, asked)
	}
	got, asked = c.callAnswering(`{"name":"ev__test_input_required_result_multiple_inputs","arguments":{}}`, map[string]string{
		"elicitation/create":     `{"action":"accept","content":{"name":"Ada"}}`,
		"sampling/createMessage": `{"role":"assistant","content":{"type":"text","text":"Hello"},"model":"m"}`,
		"roots/list":             `{"roots":[{"uri":"file:///a"},{"uri":"file:///b"}]}`,
	})
	if !strings.Contains(got, `"text":"Hello Ada — 2 root(s) visible"`) || len(asked) != 3 {
		t.Errorf("multiple-input call = %s after asking %v; want elicitation, sampling and roots, then the result", got, asked)
	}
}

// A capability the client did not declare, across eras: a 2025-11-25
// client whose call's 2026-07-28 server asks for elicitation gets an
// isError result naming it; a 2026-07-28 client over stdio whose
// session-era server asks for it gets -32021 (the server got the
// refusal); an upstream's own -32021 reaches the client as it is.
func TestMissingCapabilityAcrossEras(t *testing.T) {
	p := everythingProxy(t, "2026-07-28")
	c := sessionClient(t, p, `{"sampling":{}}`)
	got, asked := c.callAnswering(`{"name":"ev__test_input_required_result_elicitation","arguments":{}}`, nil)
	if len(asked) != 0 || !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "asked for elicitation, which this client did not declare") {
		t.Errorf("2025 client without elicitation = %s; want an isError result naming elicitation", got)
	}
	modern := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	msgs := statelessCall(t, startHTTP(t, p).URL+"/mcp", `{"name":"ev__test_missing_capability","arguments":{},`+modern+`}`)
	if got := msgs[len(msgs)-1]; !strings.Contains(got, `"code":-32021`) || !strings.Contains(got, `"requiredCapabilities"`) || !strings.Contains(got, `"sampling"`) {
		t.Errorf("the upstream's -32021 = %s; want it relayed with its data", got)
	}

	fx := connected(echoTool)
	var fp *Proxy
	upstreamErr := make(chan error, 1)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		_, err := fp.OnUpstreamRequest(ctx, "fx", "elicitation/create", json.RawMessage(`{"message":"name?","requestedSchema":{"type":"object","properties":{}}}`))
		upstreamErr <- err
		return json.RawMessage(`{"content":[{"type":"text","text":"went on without it"}]}`), nil
	}
	fp = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	sc := startStdio(t, fp)
	sc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`)
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"Missing required client capability: the MCP server asked for elicitation, ` +
		`which the client did not declare","data":{"requiredCapabilities":{"elicitation":{}}}}}`
	if got := sc.recv(`1`); got != want {
		t.Errorf("2026 client without elicitation, session-era server:\n%s\nwant\n%s", got, want)
	}
	var rpc *upstream.RPCError
	if err := <-upstreamErr; !errors.As(err, &rpc) || rpc.Code != codeMethodNotFound || !strings.Contains(rpc.Message, "does not support elicitation") {
		t.Errorf("the upstream got %v; want the -32601 refusal", err)
	}
}

// A 2026-07-28 client's prompts/get whose 2026-07-28 upstream asks for
// input: the input request passes under the upstream's key, the retry
// gets the prompt.
func TestModernClientModernServerPrompt(t *testing.T) {
	p := everythingProxy(t, "2026-07-28")
	url := startHTTP(t, p).URL + "/mcp"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	const name = `"name":"ev__test_input_required_result_prompt"`
	r1 := readModern(t, statelessPost(t, url, "prompts/get", `{`+name+`,`+meta+`}`))
	if _, ok := r1.Result.InputRequests["user_context"]; !ok || !isSealedState(r1.Result.RequestState) {
		t.Fatalf("first round = %+v; want user_context and a sealed state", r1)
	}
	got := statelessPost(t, url, "prompts/get", `{`+name+`,"inputResponses":{"user_context":{"action":"accept","content":{"context":"tea"}}},`+
		`"requestState":"`+r1.Result.RequestState+`",`+meta+`}`)
	if !strings.Contains(got, `"text":"Context: tea"`) || !strings.Contains(got, `"resultType":"complete"`) {
		t.Errorf("retry = %s; want the prompt with the answer", got)
	}
}
