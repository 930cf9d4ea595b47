package downstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestDuplicateMembersRefused: a request that repeats a member name, in
// its envelope, params or params._meta, is refused: each decoder along the
// way would read a different copy.
func TestDuplicateMembersRefused(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected(`{"name":"echo","inputSchema":{"type":"object"}}`)})
	st := testState(t, p)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":{"progressToken":"a","progressToken":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":{},"_meta":{"progressToken":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo"},"params":{"name":"x"}}`,
	} {
		reply, code, run := p.route.receive(context.Background(), st, []byte(msg), noStream{})
		if run != nil || !strings.Contains(string(reply), `"code":-32600`) || code != -32600 {
			t.Fatalf("%s: reply %s (code %d), work %v; want a -32600 refusal", msg, reply, code, run != nil)
		}
	}
}

// TestProgressOnlyFromItsServer: a progress token reaches its call only
// from the server the call went to.
func TestProgressOnlyFromItsServer(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected()})
	out := &recordStream{}
	meta, route := p.relay.progress.open(reqFor(testState(t, p), "tools/call", nil), "fx", json.RawMessage(`{"progressToken":"c"}`))
	route.out = out
	var m struct {
		ProgressToken string `json:"progressToken"`
	}
	if err := json.Unmarshal(meta, &m); err != nil || !strings.HasPrefix(m.ProgressToken, "px-progress-") || len(m.ProgressToken) < 30 {
		t.Fatalf("upstream token %q", m.ProgressToken)
	}
	p.relay.progress.deliver("other", json.RawMessage(`{"progressToken":"`+m.ProgressToken+`","progress":1}`))
	p.relay.progress.deliver("fx", json.RawMessage(`{"progressToken":"`+m.ProgressToken+`","progress":2}`))
	route.close()
	got := out.messages()
	if len(got) != 1 || !strings.Contains(got[0], `"progress":2`) || !strings.Contains(got[0], `"progressToken":"c"`) {
		t.Fatalf("client got %v; want only the fx notification, with its own token", got)
	}
	p.relay.progress.deliver("fx", json.RawMessage(`{"progressToken":"`+m.ProgressToken+`","progress":3}`))
	if len(out.messages()) != 1 {
		t.Fatal("a notification after the call ended was written")
	}
}

// TestPerCallViewsNotCached: client-chosen per-call lists do not grow the
// view cache.
func TestPerCallViewsNotCached(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected(`{"name":"echo","inputSchema":{"type":"object"}}`)})
	for i := 0; i < 100; i++ {
		st, _ := testSession(p, "", []string{"fx__echo", itoa(i)})
		if !strings.Contains(string(p.views.listFor(st)), `"fx__echo"`) {
			t.Fatal("per-call list lost the tool")
		}
	}
	p.views.mu.Lock()
	n := len(p.views.views)
	p.views.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d views cached for per-call lists", n)
	}
}
