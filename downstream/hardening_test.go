package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestDuplicateMembersRefused: a request that repeats a member name (so
// that mcp-go would read a _meta the wire layer did not) is refused.
func TestDuplicateMembersRefused(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected(`{"name":"echo","inputSchema":{"type":"object"}}`)})
	pd := newPending(p)
	st := testState(t, p)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":{"io.github.mcp-proxy/slot":"a","io.github.mcp-proxy/slot":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":{},"_meta":{"io.github.mcp-proxy/slot":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo"},"params":{"name":"x"}}`,
	} {
		answer, _ := pd.directAnswer([]byte(msg), st)
		if answer == nil {
			t.Fatalf("not refused: %s", msg)
		}
		if out := string(answer(context.Background())); !strings.Contains(out, `"code":-32600`) {
			t.Fatalf("answer = %s", out)
		}
	}
	// pd is not a stdio connection's: its tools/call goes on to mcp-go.
	if answer, _ := pd.directAnswer([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","_meta":{"a":1,"b":2}}}`), st); answer != nil {
		t.Fatal("a well-formed tools/call outside stdio was answered by the wire layer")
	}
}

// TestProgressOnlyFromItsServer: a progress token reaches its call only
// from the server the call went to.
func TestProgressOnlyFromItsServer(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected()})
	var got []string
	meta, route := p.progress.open(context.Background(), "fx", json.RawMessage(`{"progressToken":"c"}`))
	route.direct = func(b []byte) { got = append(got, string(b)) }
	var m struct {
		ProgressToken string `json:"progressToken"`
	}
	if err := json.Unmarshal(meta, &m); err != nil || !strings.HasPrefix(m.ProgressToken, "px-progress-") || len(m.ProgressToken) < 30 {
		t.Fatalf("upstream token %q", m.ProgressToken)
	}
	p.progress.deliver("other", json.RawMessage(`{"progressToken":"`+m.ProgressToken+`","progress":1}`))
	p.progress.deliver("fx", json.RawMessage(`{"progressToken":"`+m.ProgressToken+`","progress":2}`))
	route.close()
	if len(got) != 1 || !strings.Contains(got[0], `"progress":2`) || !strings.Contains(got[0], `"progressToken":"c"`) {
		t.Fatalf("client got %v; want only the fx notification, with its own token", got)
	}
	p.progress.deliver("fx", json.RawMessage(`{"progressToken":"`+m.ProgressToken+`","progress":3}`))
	if len(got) != 1 {
		t.Fatal("a notification after the call ended was written")
	}
}

// TestPerCallViewsNotCached: client-chosen per-call lists do not grow the
// view cache.
func TestPerCallViewsNotCached(t *testing.T) {
	p := newProxy(t, oneServerYAML, map[string]*fakeUpstream{"fx": connected(`{"name":"echo","inputSchema":{"type":"object"}}`)})
	for i := 0; i < 100; i++ {
		st, _ := p.newState("", []string{"fx__echo", itoa(i)})
		if !strings.Contains(string(p.listFor(st)), `"fx__echo"`) {
			t.Fatal("per-call list lost the tool")
		}
	}
	p.viewsMu.Lock()
	n := len(p.views)
	p.viewsMu.Unlock()
	if n != 0 {
		t.Fatalf("%d views cached for per-call lists", n)
	}
}

// A repeated name is found in small envelopes (compared pairwise) and in
// large objects (through a map) alike, in the envelope, params and _meta.
func TestDuplicateMembersSizes(t *testing.T) {
	obj := func(n int, dup bool) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":%d`, i, i)
		}
		if dup {
			b.WriteString(`,"k0":0`)
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	for _, n := range []int{1, 3, 15, 16, 17, 40} {
		if env, _ := readEnvelope(obj(n, false)); env.repeats || paramsRepeatName(obj(n, false)) {
			t.Errorf("%d distinct members: reported a duplicate", n)
		}
		if env, _ := readEnvelope(obj(n, true)); !env.repeats {
			t.Errorf("%d members and a repeated one: not reported", n)
		}
		if !paramsRepeatName(obj(n, true)) {
			t.Errorf("a repeated member in %d-member params: not reported", n)
		}
		meta := []byte(`{"_meta":` + string(obj(n, true)) + `}`)
		if !paramsRepeatName(meta) {
			t.Errorf("a repeated member in a %d-member _meta: not reported", n)
		}
	}
}
