//go:build redis

package downstream

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
)

// TestStatelessApprovalAcrossReplicas: with a Redis store, an approval
// asked on one replica is answered through another, and the state is good
// once across both: a replay on either runs nothing, and of two answers
// sent to both replicas at once, one runs.
func TestStatelessApprovalAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	var ran atomic.Int32
	var urls []string
	for range 2 {
		fx := connected(echoTool)
		fx.RequestFn = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			ran.Add(1)
			return json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`), nil
		}
		p := New(Options{Config: parseConfig(t, supervisedYAML), Upstreams: map[string]Upstream{"fx": fx}, Logger: testLogger(),
			Version: "test", Store: redisStore(t, srv)})
		p.Refresh()
		urls = append(urls, startHTTP(t, p).URL+"/mcp")
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	ask := func(url string) string {
		t.Helper()
		first := statelessCall(t, url, `{"name":"fx__echo","arguments":{"x":1},`+meta+`}`)
		state := regexp.MustCompile(`"requestState":"(px-approval-[0-9a-f]+)"`).FindStringSubmatch(first[len(first)-1])
		if state == nil {
			t.Fatalf("first reply = %q; want an approval question", first)
		}
		return state[1]
	}
	answer := func(url, state string) string {
		got := statelessCall(t, url, `{"name":"fx__echo","arguments":{"x":1},"requestState":"`+state+`",`+
			`"inputResponses":{"mcp-proxy/approval":{"action":"accept","content":{"decision":"approve"}}},`+meta+`}`)
		return got[len(got)-1]
	}
	state := ask(urls[0])
	if got := answer(urls[1], state); !strings.Contains(got, `"text":"ran"`) {
		t.Fatalf("answer on the other replica = %s", got)
	}
	for _, url := range urls {
		if got := answer(url, state); !strings.Contains(got, "already used") {
			t.Errorf("replayed approval = %s; want a refusal", got)
		}
	}
	state = ask(urls[1])
	var wg sync.WaitGroup
	replies := make([]string, 2)
	for i, url := range urls {
		wg.Go(func() { replies[i] = answer(url, state) })
	}
	wg.Wait()
	if n := strings.Count(strings.Join(replies, "\n"), `"text":"ran"`); n != 1 {
		t.Errorf("one state answered on both replicas at once ran %d times: %q", n, replies)
	}
	if got := ran.Load(); got != 2 {
		t.Errorf("the tool ran %d times, want 2", got)
	}
}
