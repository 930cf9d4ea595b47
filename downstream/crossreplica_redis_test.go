//go:build redis

package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/internal/seal"
	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// crossWait bounds how long a test waits for a message another replica
// should deliver: far above the few milliseconds it takes, so that only a
// message that never comes fails the test.
const crossWait = 15 * time.Second

// replica is one proxy of a pair sharing a redis-server.
type replica struct {
	p   *Proxy
	url string
}

// replicas starts n proxies over their own fake upstream fx (its RequestFn
// given by fn with the replica's index) sharing srv, with one sealing key
// derived from the store's, as cmd/mcp-proxy wires it.
func replicas(t *testing.T, srv *redistest.Server, n int, fn func(i int, p **Proxy) func(context.Context, string, json.RawMessage) (json.RawMessage, error)) []*replica {
	t.Helper()
	out := make([]*replica, n)
	for i := range n {
		st := redisStore(t, srv)
		sealer, err := seal.New(st.Keys().Sealing())
		if err != nil {
			t.Fatal(err)
		}
		fx := connected(echoTool)
		r := &replica{}
		if fn != nil {
			fx.RequestFn = fn(i, &r.p)
		}
		r.p = New(Options{Config: parseConfig(t, oneServerYAML), Upstreams: map[string]Upstream{"fx": fx}, Logger: testLogger(),
			Version: "test", Store: st, StateSealer: sealer})
		r.p.Refresh()
		r.url = startHTTP(t, r.p).URL + "/mcp"
		out[i] = r
	}
	return out
}

// shareSession makes session id known on replica to (which serves it from
// the shared store): the client sends it a ping.
func shareSession(t *testing.T, to *replica, id string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(sessionHTTPRequest(t, http.MethodPost, to.url, id, `{"jsonrpc":"2.0","id":"share","method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"result":{}`) {
		t.Fatalf("ping on the other replica: %d %s", resp.StatusCode, b)
	}
}

// sseReader reads the JSON-RPC messages of an SSE response as they come.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	msgs chan string
}

func openSSE(t *testing.T, req *http.Request) *sseReader {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	r := &sseReader{t: t, resp: resp, msgs: make(chan string, 16)}
	go func() {
		defer close(r.msgs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				r.msgs <- d
			}
		}
	}()
	return r
}

// next is the next message that contains want; it fails the test when the
// stream ends or crossWait passes first.
func (r *sseReader) next(want string) string {
	r.t.Helper()
	deadline := time.After(crossWait)
	for {
		select {
		case m, ok := <-r.msgs:
			if !ok {
				r.t.Fatalf("the stream ended before a message with %q", want)
			}
			if strings.Contains(m, want) {
				return m
			}
		case <-deadline:
			r.t.Fatalf("no message with %q within %s", want, crossWait)
		}
	}
}

func sessionHTTPRequest(t *testing.T, method, url, session, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	return req
}

// initSession opens a 2025-11-25 session on url for a client that can be
// asked for elicitation, sends its notifications/initialized to
// initializedURL, and returns its id.
func initSession(t *testing.T, url, initializedURL string) string {
	t.Helper()
	c := &httpClient{t: t, url: url}
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"test","version":"1"}}}`)
	if r.status != http.StatusOK {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	c.session = r.header.Get("Mcp-Session-Id")
	c.url = initializedURL
	if r := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", r.status, r.body)
	}
	return c.session
}

// TestNotificationReachesTheStreamOnAnotherReplica: a message for a
// session raised on a replica that does not hold the session's GET stream
// (here an upstream's log message on that replica's connection) reaches
// the client on the stream the other replica holds.
func TestNotificationReachesTheStreamOnAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	rs := replicas(t, srv, 2, nil)
	id := initSession(t, rs[0].url, rs[0].url)
	shareSession(t, rs[1], id)
	stream := openSSE(t, sessionHTTPRequest(t, http.MethodGet, rs[0].url, id, ""))
	// The stream takes messages once the GET is being served, a moment
	// after its headers: a log message on the holder itself shows it does.
	stream.attached(func() {
		rs[0].p.OnUpstreamNotification("fx", "notifications/message", json.RawMessage(`{"level":"info","data":"on the holder"}`))
	}, "on the holder")

	rs[1].p.OnUpstreamNotification("fx", "notifications/message", json.RawMessage(`{"level":"warning","data":"raised on the other replica"}`))
	got := stream.next("raised on the other replica")
	want := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","data":"raised on the other replica","logger":"fx"}}`
	if got != want {
		t.Errorf("forwarded notification = %s\nwant %s", got, want)
	}

	// A newer GET replaces the stream: the older one ends, and the
	// holder stays recorded for the newer.
	newer := openSSE(t, sessionHTTPRequest(t, http.MethodGet, rs[0].url, id, ""))
	stream.ended()
	newer.attached(func() {
		rs[0].p.OnUpstreamNotification("fx", "notifications/message", json.RawMessage(`{"level":"info","data":"on the holder again"}`))
	}, "on the holder again")
	rs[1].p.OnUpstreamNotification("fx", "notifications/message", json.RawMessage(`{"level":"info","data":"after the replacement"}`))
	newer.next("after the replacement")
}

// attached fires until a message with want arrives (what is sent before
// the stream is attached is dropped, as the transport allows).
func (r *sseReader) attached(fire func(), want string) {
	r.t.Helper()
	deadline := time.Now().Add(crossWait)
	for time.Now().Before(deadline) {
		fire()
		wait := time.After(100 * time.Millisecond)
	read:
		for {
			select {
			case m, ok := <-r.msgs:
				if !ok {
					r.t.Fatalf("the stream ended before a message with %q", want)
				}
				if strings.Contains(m, want) {
					return
				}
			case <-wait:
				break read
			}
		}
	}
	r.t.Fatalf("no message with %q within %s", want, crossWait)
}

// ended waits until the stream has ended.
func (r *sseReader) ended() {
	r.t.Helper()
	deadline := time.After(crossWait)
	for {
		select {
		case _, ok := <-r.msgs:
			if !ok {
				return
			}
		case <-deadline:
			r.t.Fatalf("the stream did not end within %s", crossWait)
		}
	}
}

// TestElicitationAnsweredThroughAnotherReplica: an upstream's elicitation
// during a session's call on one replica (whose client sent its
// notifications/initialized to the other) is answered by the client in a
// POST that reaches the other replica; the answer gets to the waiting
// call, whose result carries it.
func TestElicitationAnsweredThroughAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	rs := replicas(t, srv, 2, func(_ int, p **Proxy) func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return func(ctx context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
			if method != "tools/call" {
				return json.RawMessage(`{}`), nil
			}
			ans, err := (*p).OnUpstreamRequest(ctx, "fx", "elicitation/create",
				json.RawMessage(`{"message":"name?","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}}}`))
			if err != nil {
				return nil, err
			}
			return json.RawMessage(`{"content":[{"type":"text","text":` + string(mustQuote(string(ans))) + `}]}`), nil
		}
	})
	// notifications/initialized reaches the other replica: the question
	// of the replica that made the session does not wait for it.
	id := initSession(t, rs[0].url, rs[1].url)
	call := openSSE(t, sessionHTTPRequest(t, http.MethodPost, rs[0].url, id, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{}}}`))
	q := call.next(`"elicitation/create"`)
	var ask struct{ ID json.RawMessage }
	if err := json.Unmarshal([]byte(q), &ask); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(sessionHTTPRequest(t, http.MethodPost, rs[1].url, id,
		`{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"action":"accept","content":{"n":"ada"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer on the other replica: status %d", resp.StatusCode)
	}
	got := call.next(`"id":7`)
	if !strings.Contains(got, `\"n\":\"ada\"`) || strings.Contains(got, `"isError":true`) {
		t.Errorf("call result = %s; want the client's answer", got)
	}
}

func mustQuote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// TestParkedCallRetriedOnAnotherReplica: a stateless client's call parked
// on one replica (its 2025-era upstream asked for sampling) is retried
// with the answer on the other replica, which forwards the retry to the
// holder and answers with the call's progress and result. A retry whose holder is gone
// fails with an error saying so, and is not run anywhere.
func TestParkedCallRetriedOnAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	rs := replicas(t, srv, 2, func(i int, p **Proxy) func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			if method != "tools/call" {
				return json.RawMessage(`{}`), nil
			}
			ans, err := (*p).OnUpstreamRequest(ctx, "fx", "sampling/createMessage",
				json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"q?"}}],"maxTokens":10}`))
			if err != nil {
				return nil, err
			}
			tok, _, _ := rawjson.Get(params, "_meta")
			tok, _, _ = rawjson.Get(tok, "progressToken")
			(*p).OnUpstreamNotification("fx", "notifications/progress", json.RawMessage(`{"progressToken":`+string(tok)+`,"progress":2}`))
			progressWritten(t, *p) // before the result ends the call's route
			text := "replica " + itoa(i) + " got " + string(ans)
			return json.RawMessage(`{"content":[{"type":"text","text":` + string(mustQuote(text)) + `}]}`), nil
		}
	})
	first := statelessCall(t, rs[0].url, `{"name":"fx__echo","arguments":{},"_meta":{`+modernMeta+`,"progressToken":"a"}}`)
	var r1 struct {
		Result struct {
			InputRequests map[string]json.RawMessage
			RequestState  string
		}
	}
	if err := json.Unmarshal([]byte(first[len(first)-1]), &r1); err != nil || len(r1.Result.InputRequests) != 1 {
		t.Fatalf("first reply = %q", first)
	}
	var key string
	for k := range r1.Result.InputRequests {
		key = k
	}
	second := statelessCall(t, rs[1].url, `{"name":"fx__echo","arguments":{},"inputResponses":{"`+key+`":`+
		`{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m1"}},"requestState":"`+r1.Result.RequestState+`","_meta":{`+modernMeta+`,"progressToken":"b"}}`)
	if len(second) != 2 || !isProgress(second[0], `"b"`, 2) {
		t.Errorf("retry on the other replica = %q; want the call's progress with the retry's token, then the result", second)
	}
	got := second[len(second)-1]
	if !strings.Contains(got, `replica 0 got`) || !strings.Contains(got, `forty-two`) || !strings.Contains(got, `"resultType":"complete"`) {
		t.Fatalf("retry on the other replica = %s; want the result of the call parked on the first", got)
	}

	t.Run("holder gone", func(t *testing.T) {
		// A state naming a replica that is not there (as after kill -9 of
		// the one that parked the call): sealed with the shared key.
		st := roundState{Agent: "default", Key: "fx__echo", Round: 1, Park: "0123456789abcdef", Holder: "00000000000000000000dead"}
		state := rs[1].p.sealState(st, time.Minute)
		got := statelessCall(t, rs[1].url, `{"name":"fx__echo","arguments":{},"inputResponses":{},"requestState":"`+state+`","_meta":{`+modernMeta+`}}`)
		if len(got) != 1 || !strings.Contains(got[0], "stopped before it answered") || !strings.Contains(got[0], "not sent again") {
			t.Errorf("retry for a gone holder = %q; want an error saying the instance is gone", got)
		}
	})
}
