package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// statelessCall posts one stateless 2026-07-28 tools/call and returns the
// JSON-RPC messages of the reply (SSE events or a JSON body), in order.
func statelessCall(t *testing.T, url, params string) []string {
	t.Helper()
	c := &httpClient{t: t, url: url}
	r := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+params+`}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": toolName(params)})
	if r.status != http.StatusOK && r.status != http.StatusBadRequest { // mcp-go answers a stateless error with 400
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		return []string{strings.TrimSpace(r.body)}
	}
	var msgs []string
	for _, line := range strings.Split(r.body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			msgs = append(msgs, d)
		}
	}
	return msgs
}

func toolName(params string) string {
	v, _, _ := rawjson.Get([]byte(params), "name")
	var name string
	_ = json.Unmarshal(v, &name)
	return name
}

// isProgress reports whether msg is a progress notification with the raw
// token and value.
func isProgress(msg, token string, progress int) bool {
	var m struct {
		Method string
		Params struct {
			ProgressToken json.RawMessage
			Progress      int
		}
	}
	return json.Unmarshal([]byte(msg), &m) == nil && m.Method == "notifications/progress" &&
		string(m.Params.ProgressToken) == token && m.Params.Progress == progress
}

const modernMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`

// A stateless client's call that needs sampling spans two requests: the
// first is answered with input_required carrying the upstream's request,
// the retry hands the answer to the waiting upstream and gets the result.
// Each request gets the progress sent while it waits, with its own token,
// and nothing is written to the first once it has ended.
func TestParkedCallRoundTrip(t *testing.T) {
	fx := connected(echoTool, `{"name":"other","inputSchema":{"type":"object"}}`)
	var p *Proxy
	var sampled atomic.Value
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		tok, _, _ := rawjson.Get(params, "_meta")
		tok, _, _ = rawjson.Get(tok, "progressToken")
		progress := func(n int) {
			p.OnUpstreamNotification("fx", "notifications/progress", json.RawMessage(`{"progressToken":`+string(tok)+`,"progress":`+itoa(n)+`}`))
		}
		progress(1)
		progressWritten(t, p) // the first reply's stream takes it before the question
		ans, err := p.OnUpstreamRequest(ctx, "fx", "sampling/createMessage",
			json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":100000}`))
		if err != nil {
			return nil, err
		}
		sampled.Store(string(ans))
		progress(2)
		progressWritten(t, p) // before the result ends the call's route
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	}
	p = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"

	first := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+modernMeta+`,"progressToken":"a"}}`)
	if len(first) != 2 || !isProgress(first[0], `"a"`, 1) {
		t.Fatalf("first reply = %q; want progress 1 with token a, then the result", first)
	}
	var r1 struct {
		Result struct {
			ResultType    string
			InputRequests map[string]struct {
				Method string
				Params struct{ MaxTokens int }
			}
			RequestState string
		}
	}
	if err := json.Unmarshal([]byte(first[1]), &r1); err != nil {
		t.Fatal(err)
	}
	if r1.Result.ResultType != "input_required" || len(r1.Result.InputRequests) != 1 || !isSealedState(r1.Result.RequestState) {
		t.Fatalf("first result = %s", first[1])
	}
	var key string
	for k, ir := range r1.Result.InputRequests {
		key = k
		if ir.Method != "sampling/createMessage" || ir.Params.MaxTokens != 4096 {
			t.Errorf("input request = %+v; want sampling with maxTokens capped at 4096", ir)
		}
	}

	t.Run("unknown state", func(t *testing.T) {
		for _, state := range []string{"px1.00", r1.Result.RequestState} {
			name := "fx__echo"
			if state == r1.Result.RequestState {
				name = "fx__other" // a state is good only for its own tool
			}
			got := statelessCall(t, url, `{"name":"`+name+`","arguments":{},"requestState":"`+state+`","_meta":{`+modernMeta+`}}`)
			if len(got) != 1 || !strings.Contains(got[0], `"code":-32602`) || !strings.Contains(got[0], "invalid requestState") {
				t.Errorf("state %s for %s: %q; want -32602 invalid requestState", state, name, got)
			}
		}
	})

	answer := `{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m1"}`
	second := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"inputResponses":{"`+key+`":`+answer+`},`+
		`"requestState":"`+r1.Result.RequestState+`","_meta":{`+modernMeta+`,"progressToken":"b"}}`)
	if len(second) != 2 || !isProgress(second[0], `"b"`, 2) {
		t.Fatalf("second reply = %q; want progress 2 with token b, then the result", second)
	}
	if want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}],"resultType":"complete"}}`; second[1] != want {
		t.Errorf("final result = %s\nwant %s", second[1], want)
	}
	if s, _ := sampled.Load().(string); !strings.Contains(s, `"forty-two"`) || !strings.Contains(s, `"m1"`) {
		t.Errorf("the upstream got %q; want the client's answer", s)
	}
	// The state was good for one retry.
	again := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"requestState":"`+r1.Result.RequestState+`","_meta":{`+modernMeta+`}}`)
	if len(again) != 1 || !strings.Contains(again[0], "invalid requestState") {
		t.Errorf("the used state was accepted again: %q", again)
	}
}

// A client that never comes back: the upstream's request ends with the
// call after the server's timeout; a client without sampling is refused at
// once, the upstream sees the refusal, and the client's call fails with
// -32021 naming the capability.
func TestParkedCallLimits(t *testing.T) {
	fx := connected(echoTool)
	var p *Proxy
	upstreamErr := make(chan error, 1)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		_, err := p.OnUpstreamRequest(ctx, "fx", "sampling/createMessage",
			json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`))
		upstreamErr <- err
		if err != nil {
			return json.RawMessage(`{"content":[{"type":"text","text":"` + strings.ReplaceAll(err.Error(), `"`, `'`) + `"}],"isError":true}`), nil
		}
		return json.RawMessage(`{"content":[]}`), nil
	}
	p = newProxy(t, strings.Replace(oneServerYAML, "timeout: 5s", "timeout: 300ms", 1), map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"

	noSampling := strings.Replace(modernMeta, `{"sampling":{}}`, `{}`, 1)
	got := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+noSampling+`}}`)
	if err := <-upstreamErr; err == nil || !strings.Contains(err.Error(), "does not support sampling") {
		t.Errorf("upstream got %v; want the refusal", err)
	}
	if len(got) != 1 || !strings.Contains(got[0], `"error":{"code":-32021,`) || !strings.Contains(got[0], `"data":{"requiredCapabilities":{"sampling":{}}}`) {
		t.Errorf("reply = %q; want -32021 naming sampling (MCP 2026-07-28: MissingRequiredClientCapabilityError)", got)
	}

	first := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+modernMeta+`}}`)
	state := regexp.MustCompile(`"requestState":"([^"]+)"`).FindStringSubmatch(first[len(first)-1])
	if state == nil {
		t.Fatalf("first reply = %q; want input_required", first)
	}
	select {
	case err := <-upstreamErr:
		if err == nil {
			t.Error("the unanswered request succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not ended after the call's timeout")
	}
}

// A server request whose context names its session exactly (an HTTP
// upstream answering another client's resources/read, say) goes to that
// session, never to a parked stateless call that happens to be the only
// tool call in flight to the server.
func TestParkedCallNeverTakesAnotherSessionsRequest(t *testing.T) {
	fx := connected(echoTool)
	var p *Proxy
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if _, err := p.OnUpstreamRequest(ctx, "fx", "sampling/createMessage",
			json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`)); err != nil {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond)
		return json.RawMessage(`{"content":[]}`), nil
	}
	p = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"
	meta := strings.Replace(modernMeta, `{"sampling":{}}`, `{"sampling":{},"elicitation":{}}`, 1)
	first := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+meta+`}}`)
	state := regexp.MustCompile(`"requestState":"([^"]+)"`).FindStringSubmatch(first[len(first)-1])
	if state == nil {
		t.Fatalf("first reply = %q", first)
	}
	otherSess := testState(t, p)
	otherSess.markInitialized()
	otherOut := &recordStream{}
	otherReq := &request{sess: otherSess, id: json.RawMessage("9"), method: "resources/read", out: otherOut, caps: clientCaps{elicitation: true}}
	// The other session's question stays pending (unanswered) through the
	// retry: the test waits until it was sent, and ends it at cleanup.
	octx, cancel := context.WithCancel(withRequest(context.Background(), otherReq))
	defer cancel()
	go func() {
		_, _ = p.OnUpstreamRequest(octx, "fx", "elicitation/create",
			json.RawMessage(`{"message":"ANOTHER SESSION'S QUESTION","requestedSchema":{"type":"object","properties":{}}}`))
	}()
	for deadline := time.Now().Add(10 * time.Second); len(otherOut.messages()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other session's question was not sent within 10s")
		}
	}
	second := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"inputResponses":{"mcp-proxy/sampling-createMessage-1":`+
		`{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}},"requestState":"`+state[1]+`","_meta":{`+meta+`}}`)
	if all := strings.Join(second, "\n"); strings.Contains(all, "ANOTHER SESSION") || !strings.Contains(all, `"resultType":"complete"`) {
		t.Errorf("retry = %q; want the call's result and nothing of the other session", second)
	}
	if got := otherOut.messages(); len(got) != 1 || !strings.Contains(got[0], "ANOTHER SESSION") {
		t.Errorf("the other session's stream got %q; want its own question", got)
	}
}

// A call that ends while its client is away, holding a progress value
// kept while detached: the retry gets the result and no progress after the
// call's route closed (which would write to a response already finished),
// and the state is used up.
func TestParkedCallEndedWhileAway(t *testing.T) {
	fx := connected(echoTool)
	var p *Proxy
	ended := make(chan struct{}, 8)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		defer func() { ended <- struct{}{} }()
		tok, _, _ := rawjson.Get(params, "_meta")
		tok, _, _ = rawjson.Get(tok, "progressToken")
		actx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		_, _ = p.OnUpstreamRequest(actx, "fx", "sampling/createMessage",
			json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`))
		cancel()
		p.OnUpstreamNotification("fx", "notifications/progress", json.RawMessage(`{"progressToken":`+string(tok)+`,"progress":5}`))
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	}
	p = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"
	for range 5 {
		first := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+modernMeta+`,"progressToken":"a"}}`)
		state := regexp.MustCompile(`"requestState":"([^"]+)"`).FindStringSubmatch(first[len(first)-1])
		if state == nil {
			t.Fatalf("first reply = %q", first)
		}
		<-ended
		time.Sleep(20 * time.Millisecond)
		second := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"inputResponses":{"mcp-proxy/sampling-createMessage-1":`+
			`{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}},"requestState":"`+state[1]+`","_meta":{`+modernMeta+`,"progressToken":"b"}}`)
		if len(second) != 1 || !strings.Contains(second[0], `"text":"done"`) {
			t.Fatalf("retry = %q; want just the result", second)
		}
		again := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"requestState":"`+state[1]+`","_meta":{`+modernMeta+`}}`)
		if len(again) != 1 || !strings.Contains(again[0], "invalid requestState") {
			t.Fatalf("the state was good again after it gave the outcome: %q", again)
		}
	}
	p.relay.parked.mu.Lock()
	defer p.relay.parked.mu.Unlock()
	if n := len(p.relay.parked.m); n != 0 {
		t.Errorf("%d states held after every call gave its outcome", n)
	}
}

// Each agent has at most maxParkedPerAgent calls waiting for their
// clients; a place comes back when its call ends, and a call counts once.
func TestParkTableBoundsAgents(t *testing.T) {
	var tab parkTable
	calls := make([]*parkedCall, maxParkedPerAgent)
	for i := range calls {
		calls[i] = &parkedCall{agent: "a"}
		first, again := tab.reserve(calls[i]), tab.reserve(calls[i]) // a call counts once
		if !first || !again {
			t.Fatalf("call %d refused below the bound", i)
		}
	}
	if tab.reserve(&parkedCall{agent: "a"}) {
		t.Error("a call beyond the bound was taken")
	}
	if !tab.reserve(&parkedCall{agent: "b"}) {
		t.Error("another agent's call was refused")
	}
	tab.release(calls[0])
	tab.release(calls[0])
	if !tab.reserve(&parkedCall{agent: "a"}) {
		t.Error("a released place was not reused")
	}
	if tab.reserve(&parkedCall{agent: "a"}) {
		t.Error("releasing one call twice freed two places")
	}
}

// statelessPost posts one stateless 2026-07-28 request and returns the
// body's one JSON-RPC message.
func statelessPost(t *testing.T, url, method, params string) string {
	t.Helper()
	c := &httpClient{t: t, url: url}
	r := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": targetOf(params)})
	if r.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", method, r.status, r.body)
	}
	return strings.TrimSpace(r.body)
}

// targetOf is the name or URI a request's params name.
func targetOf(params string) string {
	for _, k := range []string{"name", "uri"} {
		if v, ok, _ := rawjson.Get([]byte(params), k); ok {
			var s string
			_ = json.Unmarshal(v, &s)
			return s
		}
	}
	return ""
}

// A stateless client's resources/read and prompts/get whose upstream asks
// for sampling get the question as input_required and, on the retry with
// the answer, the upstream's result.
func TestParkedSurfaceRoundTrip(t *testing.T) {
	fx := surfaceUpstream()
	var p *Proxy
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		ans, err := p.OnUpstreamRequest(ctx, "fx", "sampling/createMessage",
			json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`))
		if err != nil {
			return nil, err
		}
		text, _ := json.Marshal(method + " got " + string(ans))
		if method == "prompts/get" {
			return json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":` + string(text) + `}}]}`), nil
		}
		return json.RawMessage(`{"contents":[{"uri":"test://doc","text":` + string(text) + `}]}`), nil
	}
	p = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"
	uri, prompt := surfaceNames(t, p)

	for _, c := range []struct{ method, target, want string }{
		{"resources/read", `"uri":"` + uri + `"`, `"contents"`},
		{"prompts/get", `"name":"` + prompt + `"`, `"messages"`},
	} {
		first := statelessPost(t, url, c.method, `{`+c.target+`,"_meta":{`+modernMeta+`}}`)
		var r1 struct {
			Result struct {
				ResultType    string
				InputRequests map[string]struct{ Method string }
				RequestState  string
			}
		}
		if err := json.Unmarshal([]byte(first), &r1); err != nil || r1.Result.ResultType != "input_required" || len(r1.Result.InputRequests) != 1 {
			t.Fatalf("%s first reply = %s", c.method, first)
		}
		var key string
		for k := range r1.Result.InputRequests {
			key = k
		}
		answer := `{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m1"}`
		second := statelessPost(t, url, c.method, `{`+c.target+`,"inputResponses":{"`+key+`":`+answer+`},"requestState":"`+
			r1.Result.RequestState+`","_meta":{`+modernMeta+`}}`)
		if !strings.Contains(second, c.want) || !strings.Contains(second, `forty-two`) || !strings.Contains(second, `"resultType":"complete"`) {
			t.Errorf("%s retry = %s; want the result with the client's answer", c.method, second)
		}
	}
}

// The per-hop protocol keys of a 2026-07-28 client's _meta stay with the
// proxy on resources/read and prompts/get as on tools/call; the client's
// other _meta keys go upstream.
func TestSurfaceRequestsDropHopMeta(t *testing.T) {
	fx := surfaceUpstream()
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "prompts/get" {
			return json.RawMessage(`{"messages":[]}`), nil
		}
		return json.RawMessage(`{"contents":[]}`), nil
	}
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"
	uri, prompt := surfaceNames(t, p)
	statelessPost(t, url, "resources/read", `{"uri":"`+uri+`","_meta":{`+modernMeta+`,"trace/id":"t1"}}`)
	statelessPost(t, url, "prompts/get", `{"name":"`+prompt+`","_meta":{"trace/id":"t2",`+modernMeta+`}}`)
	reqs := fx.requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream got %d requests, want 2: %v", len(reqs), reqs)
	}
	for i, want := range []string{`"_meta":{"trace/id":"t1"}`, `"_meta":{"trace/id":"t2"}`} {
		if strings.Contains(reqs[i].Params, protocolMetaPrefix) || !strings.Contains(reqs[i].Params, want) {
			t.Errorf("%s upstream params = %s; want %s and no %s keys", reqs[i].Method, reqs[i].Params, want, protocolMetaPrefix)
		}
	}
}

// surfaceUpstream is a connected fake upstream with one resource
// (test://doc) and one prompt (ask); the test sets its RequestFn.
func surfaceUpstream() *fakeUpstream {
	fx := &fakeUpstream{}
	fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnected,
		Capabilities: upstream.Capabilities{Resources: true, Prompts: true},
		Resources:    []json.RawMessage{json.RawMessage(`{"uri":"test://doc","name":"doc"}`)},
		Prompts:      []json.RawMessage{json.RawMessage(`{"name":"ask"}`)},
	})
	return fx
}

// surfaceNames is the URI and the prompt name under which p exposes
// surfaceUpstream's resource and prompt.
func surfaceNames(t *testing.T, p *Proxy) (uri, prompt string) {
	t.Helper()
	st := testState(t, p)
	list, werr := p.surface.listResources(context.Background(), reqFor(st, "resources/list", nil))
	if werr != nil {
		t.Fatal(werr)
	}
	prompts, werr := p.surface.listPrompts(context.Background(), reqFor(st, "prompts/list", nil))
	if werr != nil {
		t.Fatal(werr)
	}
	return regexp.MustCompile(`"uri":"([^"]+)"`).FindStringSubmatch(string(list))[1],
		regexp.MustCompile(`"name":"([^"]+)"`).FindStringSubmatch(string(prompts))[1]
}

// progressWritten waits until every call's progress sender has written the
// values it was given: it runs on its own goroutine, and a route detached
// before it wrote keeps the value for the call's next request.
func progressWritten(t *testing.T, p *Proxy) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		pr := &p.relay.progress
		pr.mu.Lock()
		routes := make([]*progressRoute, 0, len(pr.routes))
		for _, rt := range pr.routes {
			routes = append(routes, rt)
		}
		pr.mu.Unlock()
		busy := false
		for _, rt := range routes {
			rt.mu.Lock()
			busy = busy || rt.sending || rt.latest != nil
			rt.mu.Unlock()
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Error("progress not written within 10s")
			return
		}
	}
}

// A session-era upstream that sends two requests at once during a
// stateless client's call gets both asked in one round; its next request
// is the next round, under a new state; the state of a round that was
// answered is not good again.
func TestParkedCallRoundsTogether(t *testing.T) {
	fx := connected(echoTool)
	var p *Proxy
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		answers := make(chan string, 2)
		for _, m := range []string{"sampling/createMessage", "elicitation/create"} {
			go func() {
				req := `{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`
				if m == "elicitation/create" {
					req = `{"message":"name?","requestedSchema":{"type":"object","properties":{}}}`
				}
				ans, err := p.OnUpstreamRequest(ctx, "fx", m, json.RawMessage(req))
				answers <- m + "=" + string(ans) + errText(err)
			}()
		}
		got := []string{<-answers, <-answers}
		third, err := p.OnUpstreamRequest(ctx, "fx", "elicitation/create", json.RawMessage(`{"message":"color?","requestedSchema":{"type":"object","properties":{}}}`))
		got = append(got, "third="+string(third)+errText(err))
		text, _ := json.Marshal(strings.Join(got, " | "))
		return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`), nil
	}
	p = newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	p.relay.gather = 500 * time.Millisecond // the two requests start together: ample, even under -race on 2 loaded cores
	url := startHTTP(t, p).URL + "/mcp"
	meta := strings.Replace(modernMeta, `{"sampling":{}}`, `{"sampling":{},"elicitation":{}}`, 1)

	r1 := readModern(t, statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+meta+`}}`)[0])
	if len(r1.Result.InputRequests) != 2 || !isSealedState(r1.Result.RequestState) {
		t.Fatalf("round 1 = %+v; want both requests and a sealed state", r1)
	}
	answers := map[string]string{
		"sampling/createMessage": `{"role":"assistant","content":{"type":"text","text":"S"},"model":"m"}`,
		"elicitation/create":     `{"action":"accept","content":{"v":"E"}}`,
	}
	responses := func(r modernResult) string {
		var parts []string
		for k, ir := range r.Result.InputRequests {
			parts = append(parts, `"`+k+`":`+answers[ir.Method])
		}
		return `{` + strings.Join(parts, ",") + `}`
	}
	retry := func(state, responses string) modernResult {
		msgs := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"inputResponses":`+responses+`,"requestState":"`+state+`","_meta":{`+meta+`}}`)
		return readModern(t, msgs[len(msgs)-1])
	}
	r2 := retry(r1.Result.RequestState, responses(r1))
	if len(r2.Result.InputRequests) != 1 || r2.Result.RequestState == r1.Result.RequestState || !isSealedState(r2.Result.RequestState) {
		t.Fatalf("round 2 = %+v; want the third request under a new sealed state", r2)
	}
	if again := retry(r1.Result.RequestState, responses(r1)); again.Error == nil || !strings.Contains(again.Error.Message, "invalid requestState") {
		t.Errorf("round 1's state again = %+v; want invalid requestState", again)
	}
	r3 := retry(r2.Result.RequestState, responses(r2))
	if len(r3.Result.Content) != 1 {
		t.Fatalf("round 3 = %+v; want the result", r3)
	}
	for _, want := range []string{`sampling/createMessage={"role":"assistant"`, `elicitation/create={"action":"accept","content":{"v":"E"}}`, `third={"action"`} {
		if !strings.Contains(r3.Result.Content[0].Text, want) {
			t.Errorf("the upstream got %s; want %s", r3.Result.Content[0].Text, want)
		}
	}
}

func errText(err error) string {
	if err != nil {
		return " error: " + err.Error()
	}
	return ""
}

// A stateless client that never answers: when its state expires the call
// is cancelled upstream and at once stops counting as in flight to the
// server, even while the server is slow to wind it down, so that another
// client's call to the same stdio-like server (whose requests name no
// call) gets its server's request.
func TestAbandonedParkedCallStopsCounting(t *testing.T) {
	fx := connected(echoTool, `{"name":"other","inputSchema":{"type":"object"}}`)
	var p *Proxy
	cancelled := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if strings.Contains(string(params), `"name":"echo"`) { // the abandoned client's call
			go func() {
				_, _ = p.OnUpstreamRequest(context.Background(), "fx", "sampling/createMessage",
					json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`))
			}()
			<-ctx.Done()
			close(cancelled)
			<-release // a server slow to end the cancelled call
			return nil, ctx.Err()
		}
		ans, err := p.OnUpstreamRequest(context.Background(), "fx", "elicitation/create",
			json.RawMessage(`{"message":"name?","requestedSchema":{"type":"object","properties":{}}}`))
		if err != nil {
			return json.RawMessage(`{"content":[{"type":"text","text":` + string(rawjson.String(err.Error())) + `}],"isError":true}`), nil
		}
		return json.RawMessage(`{"content":[{"type":"text","text":` + string(rawjson.String(string(ans))) + `}]}`), nil
	}
	p = newProxy(t, strings.Replace(oneServerYAML, "timeout: 5s", "timeout: 300ms", 1), map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"
	first := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+modernMeta+`}}`)
	if !strings.Contains(first[len(first)-1], `"resultType":"input_required"`) {
		t.Fatalf("first reply = %q; want input_required", first)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned call was not cancelled upstream when its state expired")
	}
	c := sessionClient(t, p, `{"elicitation":{}}`)
	got, asked := c.callAnswering(`{"name":"fx__other","arguments":{}}`, map[string]string{"elicitation/create": `{"action":"accept","content":{"n":"B"}}`})
	if len(asked) != 1 || !strings.Contains(got, `{\"action\":\"accept\"`) {
		t.Errorf("the other client's call = %s after asking %v; want its own elicitation answered", got, asked)
	}
}

// A stateless client that leaves its parked call (it never answers the
// question the call raised) does not keep another client's call to the
// same stdio-like server from being asked, even before the abandoned
// call's state expires: the abandoned call waits for its own answer, so
// the server's next requests are the other call's, both of the two it
// sends at once.
func TestParkedCallWaitingForItsAnswerLeavesRequestsToOthers(t *testing.T) {
	fx := connected(echoTool, `{"name":"other","inputSchema":{"type":"object"}}`)
	var p *Proxy
	ask := func(method, params string) string {
		ans, err := p.OnUpstreamRequest(context.Background(), "fx", method, json.RawMessage(params))
		if err != nil {
			return err.Error()
		}
		return string(ans)
	}
	fx.RequestFn = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if strings.Contains(string(params), `"name":"echo"`) { // the abandoned client's call
			ask("elicitation/create", `{"message":"ABANDONED CALL'S QUESTION","requestedSchema":{"type":"object","properties":{}}}`)
			return json.RawMessage(`{"content":[]}`), nil
		}
		sampled := make(chan string, 1)
		go func() {
			sampled <- ask("sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`)
		}()
		elicited := ask("elicitation/create", `{"message":"name?","requestedSchema":{"type":"object","properties":{}}}`)
		text := elicited + " " + <-sampled
		return json.RawMessage(`{"content":[{"type":"text","text":` + string(rawjson.String(text)) + `}]}`), nil
	}
	p = newProxy(t, strings.Replace(oneServerYAML, "timeout: 5s", "timeout: 1m", 1), map[string]*fakeUpstream{"fx": fx})
	url := startHTTP(t, p).URL + "/mcp"
	meta := strings.Replace(modernMeta, `{"sampling":{}}`, `{"elicitation":{}}`, 1)
	first := statelessCall(t, url, `{"name":"fx__echo","arguments":{},"_meta":{`+meta+`}}`)
	if !strings.Contains(first[len(first)-1], `"resultType":"input_required"`) || !strings.Contains(first[len(first)-1], "ABANDONED") {
		t.Fatalf("first reply = %q; want input_required with the question", first)
	}
	c := sessionClient(t, p, `{"elicitation":{},"sampling":{}}`)
	got, asked := c.callAnswering(`{"name":"fx__other","arguments":{}}`, map[string]string{
		"elicitation/create":     `{"action":"accept","content":{"n":"B"}}`,
		"sampling/createMessage": `{"role":"assistant","content":{"type":"text","text":"SAMPLED"},"model":"m"}`,
	})
	if len(asked) != 2 || !strings.Contains(got, `{\"action\":\"accept\"`) || !strings.Contains(got, "SAMPLED") {
		t.Errorf("the other client's call = %s after asking %v; want both its questions answered", got, asked)
	}
}

// TestAskRefusals: a server request put to a parked call's client is
// refused with a text that says which step it did not pass, the hand-over
// to the client's next round or the answer, and why; an answer is
// returned as it came.
func TestAskRefusals(t *testing.T) {
	const relayed, answered = "relayed", "answered"
	for _, tc := range []struct {
		name    string
		step    string        // how far the ask gets before the end
		end     string        // "done", "call", "ctx", "timer" or "answer"
		timeout time.Duration // the ask's
		want    string
	}{
		{"call ended before the round", "", "done", time.Minute, "roots/list not relayed: the call ended"},
		{"call cancelled before the round", "", "call", time.Minute, "roots/list not relayed: the call was cancelled"},
		{"asker gone before the round", "", "ctx", time.Minute, "roots/list not relayed: the call ended"},
		{"no round in time", "", "timer", time.Nanosecond, "roots/list not relayed: another request of this call is still unanswered"},
		{"call ended before the answer", relayed, "done", time.Minute, "roots/list not answered: the call ended"},
		{"call cancelled before the answer", relayed, "call", time.Minute,
			"roots/list not answered: the call was cancelled (its client did not come back)"},
		{"asker gone before the answer", relayed, "ctx", time.Minute, "roots/list not answered: the call ended"},
		{"no answer in time", relayed, "timer", time.Second, "the client did not answer the roots/list request within 1s"},
		{"answered", answered, "answer", time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			callCtx, cancelCall := context.WithCancel(t.Context())
			defer cancelCall()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			pc := &parkedCall{agent: "a", asks: make(chan *inputAsk), done: make(chan struct{}), ctx: callCtx}
			end := func() {
				switch tc.end {
				case "done":
					close(pc.done)
				case "call":
					cancelCall()
				case "ctx":
					cancel()
				}
			}
			if tc.step == "" {
				end()
			} else {
				go func() {
					a := <-pc.asks // the client's next round takes the request
					if tc.end == "answer" {
						a.answer <- inputAnswer{result: json.RawMessage(`{"roots":[]}`)}
						return
					}
					end()
				}()
			}
			res, err := (&relay{}).ask(ctx, pc, "roots/list", nil, tc.timeout)
			if tc.want == "" {
				if err != nil || string(res) != `{"roots":[]}` {
					t.Fatalf("ask = %s, %v; want the answer", res, err)
				}
				return
			}
			var rpc *upstream.RPCError
			if !errors.As(err, &rpc) || rpc.Code != codeRefused || rpc.Message != tc.want {
				t.Fatalf("ask = %s, %v; want the refusal %q", res, err, tc.want)
			}
		})
	}
}
