package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// TestProgressRelayStdio: the upstream sees the proxy's own token, the
// client gets its own token back, every value in order and all of them
// before the call's response.
func TestProgressRelayStdio(t *testing.T) {
	fx := connected(`{"name":"work","inputSchema":{"type":"object"}}`)
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	fx.RequestFn = func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
		meta, _, _ := rawjson.Get(params, "_meta")
		tok, _, _ := rawjson.Get(meta, "progressToken")
		if !strings.HasPrefix(string(tok), `"px-progress-`) {
			t.Errorf("upstream token = %s", tok)
		}
		for i := 1; i <= 50; i++ {
			p.OnUpstreamNotification("fx", "notifications/progress",
				json.RawMessage(`{"progressToken":`+string(tok)+`,"progress":`+itoa(i)+`,"total":50}`))
			time.Sleep(time.Millisecond)
		}
		return json.RawMessage(`{"content":[]}`), nil
	}
	c := startStdio(t, p)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fx__work","_meta":{"progressToken":12345678901234567890}}}`)
	var got []float64
	for line := range c.lines {
		if _, isResp := responseID([]byte(line)); isResp {
			break
		}
		var n struct {
			Method string `json:"method"`
			Params struct {
				Token    json.RawMessage `json:"progressToken"`
				Progress float64         `json:"progress"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &n) != nil || n.Method != "notifications/progress" {
			continue
		}
		if string(n.Params.Token) != "12345678901234567890" {
			t.Fatalf("client token = %s", n.Params.Token)
		}
		got = append(got, n.Params.Progress)
	}
	if len(got) == 0 || got[len(got)-1] != 50 {
		t.Fatalf("progress before the response = %v; the last value (50) must arrive first", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("progress out of order: %v", got)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestSamplingRateWindow(t *testing.T) {
	var w rateWindow
	now := time.Now()
	for i := 0; i < 3; i++ {
		if !w.allow("s", 3, now.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("request %d refused", i)
		}
	}
	if w.allow("s", 3, now.Add(10*time.Second)) {
		t.Fatal("4th request within a minute allowed")
	}
	if !w.allow("other", 3, now) {
		t.Fatal("another server shares the window")
	}
	if !w.allow("s", 3, now.Add(61*time.Second)) {
		t.Fatal("the window did not slide")
	}
}

func TestUpstreamRequestRouting(t *testing.T) {
	fx := connected(`{"name":"work","inputSchema":{"type":"object"}}`)
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": fx})
	_, err := p.OnUpstreamRequest(context.Background(), "fx", "sampling/createMessage", json.RawMessage(`{}`))
	if err == nil || !strings.Contains(err.Error(), "no client call to this server is in flight") {
		t.Fatalf("no call in flight: %v", err)
	}
	a, _ := testSession(p, "", nil)
	b, _ := testSession(p, "", nil)
	endA := p.relay.calls.begin(context.Background(), "fx", reqFor(a, "tools/call", nil))
	endB := p.relay.calls.begin(context.Background(), "fx", reqFor(b, "tools/call", nil))
	_, err = p.OnUpstreamRequest(context.Background(), "fx", "sampling/createMessage", json.RawMessage(`{}`))
	if err == nil || !strings.Contains(err.Error(), "2 client sessions have calls in flight") {
		t.Fatalf("two sessions: %v", err)
	}
	endA()
	endB()
}

// A server request that names no call (stdio, SSE) goes to the one
// session whose call to the server is free to ask: a call that has waited
// a while for the answer to a question of its own is not the one asking
// again, unless no other call is in flight; one that began waiting within
// the burst may still be (a handler asking several questions at once).
func TestServerRequestAttribution(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected()})
	sess := func() *session {
		s, err := testSession(p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, c := sess(), sess(), sess()
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	const burst = 50 * time.Millisecond
	// A call's state: free, waiting for an answer since long ago, or since
	// just now (within the burst).
	const (
		free = iota
		waiting
		justAsked
	)
	type call struct {
		s     *session
		state int
	}
	for _, tc := range []struct {
		name  string
		calls []call
		want  *session // nil: refused
		n     int
	}{
		{"none", nil, nil, 0},
		{"one free", []call{{a, free}}, a, 1},
		{"two sessions free", []call{{a, free}, {b, free}}, nil, 2},
		{"one waiting, one free", []call{{a, waiting}, {b, free}}, b, 1},
		{"one waiting alone", []call{{a, waiting}}, a, 1},
		{"both waiting", []call{{a, waiting}, {b, waiting}}, nil, 2},
		{"one waiting, two free", []call{{a, waiting}, {b, free}, {c, free}}, nil, 2},
		{"one session waiting and free", []call{{a, waiting}, {a, free}, {b, waiting}}, a, 1},
		{"two waiting, one just asked", []call{{a, waiting}, {b, waiting}, {c, justAsked}}, c, 1},
		{"one just asked, one free", []call{{a, justAsked}, {b, free}}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reg callRegistry
			for _, cl := range tc.calls {
				r := reqFor(cl.s, "tools/call", nil)
				switch cl.state {
				case waiting:
					defer r.startAsking(now.Add(-time.Minute))()
				case justAsked:
					defer r.startAsking(now.Add(-burst / 2))()
				}
				defer reg.begin(context.Background(), "fx", r)()
			}
			got, n := reg.only("fx", now, burst)
			var gotSess *session
			if got != nil {
				gotSess = got.sess
			}
			if gotSess != tc.want || n != tc.n {
				t.Errorf("only = session %p of %d; want %p of %d", gotSess, n, tc.want, tc.n)
			}
		})
	}
}

// Sampling reaches the client as the upstream wrote it, but for what the
// proxy governs: maxTokens capped, includeContext "none" (the client sees
// one server, so another upstream's context must not reach this one).
func TestSamplingRewrite(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected()})
	s := testState(t, p)
	s.markInitialized()
	out := &recordStream{}
	r := &request{sess: s, id: json.RawMessage("1"), method: "tools/call", out: out, caps: clientCaps{sampling: true}}
	ctx := withRequest(context.Background(), r)
	done := make(chan string, 1)
	go func() {
		res, err := p.OnUpstreamRequest(ctx, "fx", "sampling/createMessage", json.RawMessage(
			`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":1e9,"includeContext":"allServers","x-extra":18446744073709551615}`))
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(res)
	}()
	var sent string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := out.messages(); len(m) > 0 {
			sent = m[0]
			break
		}
	}
	want := `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],` +
		`"maxTokens":4096,"includeContext":"none","x-extra":18446744073709551615}}`
	if sent != want {
		t.Fatalf("sent to the client:\n%s\nwant\n%s", sent, want)
	}
	s.asks.deliver(mustParse(t, `{"jsonrpc":"2.0","id":1,"result":{"role":"assistant","content":{"type":"text","text":"a"},"model":"m"}}`))
	if got := <-done; got != `{"role":"assistant","content":{"type":"text","text":"a"},"model":"m"}` {
		t.Errorf("upstream got %s", got)
	}
}

func mustParse(t *testing.T, msg string) rawjson.Message {
	t.Helper()
	m, err := rawjson.ParseMessage([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
