package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/upstream"
)

// mcp_resources list returns the upstream's items with their strings
// sanitized (docs/resources.md#resources-and-prompts: the content is untrusted, docs/protocol.md#fidelity): a TAG character
// raw or escaped is gone, a secret is redacted, and the members keep
// their order. The uri, which the client sends back to read, keeps its
// query.
func TestResourceToolListSanitized(t *testing.T) {
	fx := &fakeUpstream{}
	fx.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true},
		Resources: []json.RawMessage{json.RawMessage("{\"uri\":\"r://s\U000E0041?id=5\",\"name\":\"n\\udb40\\udc41\",\"description\":\"see sk-abcdefghijklmnopqrstuvwxyz012345 at https://x.y/p?q=1\",\"size\":12.50}")}})
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  fx: {command: fixture}\n", map[string]*fakeUpstream{"fx": fx})
	got, _ := p.route.answer(context.Background(), reqFor(testState(t, p), "tools/call", json.RawMessage(`{"name":"mcp_resources","arguments":{"action":"list"}}`)))
	var res struct {
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(rawResult(t, got.bytes()), &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("result %s: %v", got.bytes(), err)
	}
	want := `[{"uri":"fx__r://s?id=5","name":"n","description":"see [REDACTED] at https://x.y/p","size":12.50}]`
	if res.Content[0].Text != want {
		t.Errorf("list = %s\nwant  %s", res.Content[0].Text, want)
	}
}

// FuzzUntrustedJSON: the sanitized item is valid JSON holding what the
// item held, every string (keys too) passed through the sanitizer but the
// item's own uri, which only loses TAG characters.
func FuzzUntrustedJSON(f *testing.F) {
	f.Add([]byte(`{"a":[1,"x",{"b":null,"c":true}],"d":"e\u0000"}`))
	f.Add([]byte(`["password=hunter2", 1e3, -0.5, [], {}]`))
	f.Add([]byte("\"\U000E0041\""))
	f.Add([]byte(`{"uri":"r://x?token=1","":"\b0"}`))
	own := &ownTools{env: &env{}}
	own.scrubber.Store(sanitize.NewScrubber(nil))
	f.Fuzz(func(t *testing.T, item []byte) {
		var in any
		if json.Unmarshal(item, &in) != nil || !json.Valid(item) {
			return
		}
		out := own.untrustedJSON(item, "uri")
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("untrustedJSON(%q) = %q: %v", item, out, err)
		}
		want := cleanAll(own, in)
		if obj, ok := in.(map[string]any); ok {
			if uri, ok := obj["uri"].(string); ok {
				want.(map[string]any)["uri"] = sanitize.StripTags(uri) // the item's id keeps its query
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("untrustedJSON(%q) = %q\ngot  %#v\nwant %#v", item, out, got, want)
		}
	})
}

// cleanAll is the reference: every string of a decoded value sanitized.
func cleanAll(p *ownTools, v any) any {
	switch x := v.(type) {
	case string:
		return sanitize.StripTags(p.cleanText(x))
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = cleanAll(p, x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[sanitize.StripTags(p.cleanText(k))] = cleanAll(p, e)
		}
		return out
	}
	return v
}

// rawResult is the result member of a JSON-RPC response.
func rawResult(t *testing.T, resp []byte) json.RawMessage {
	t.Helper()
	var m struct{ Result json.RawMessage }
	if err := json.Unmarshal(resp, &m); err != nil || m.Result == nil {
		t.Fatalf("no result in %s: %v", resp, err)
	}
	return bytes.TrimSpace(m.Result)
}
