package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/upstream"
)

func TestCursorRoundTrip(t *testing.T) {
	list := []byte(`[{"uri":"a"},{"uri":"b"}]`)
	c := encodeCursor(list, 1)
	if off, err := decodeCursor(c, list, 2); err != nil || off != 1 {
		t.Fatalf("decode = %d, %v", off, err)
	}
	for name, tc := range map[string]struct {
		cursor string
		list   []byte
	}{
		"changed list": {c, []byte(`[{"uri":"a"}]`)},
		"garbage":      {"%%%", list},
		"empty":        {"", list},
		"offset past":  {encodeCursor(list, 5), list},
		"offset zero":  {encodeCursor(list, 0), list},
	} {
		if _, err := decodeCursor(tc.cursor, tc.list, 2); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecodeCursor(f *testing.F) {
	list := []byte(`[1,2,3]`)
	f.Add(encodeCursor(list, 1))
	f.Add("AAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, cursor string) {
		off, err := decodeCursor(cursor, list, 3)
		if err == nil && (off <= 0 || off >= 3) {
			t.Fatalf("cursor %q decoded to offset %d", cursor, off)
		}
	})
}

// TestMergedResourcePages pages 1,200 resources of two servers with the
// proxy's cursors: every item once, in order, and a stale cursor refused.
func TestMergedResourcePages(t *testing.T) {
	mk := func(prefix string, n int) []json.RawMessage {
		var out []json.RawMessage
		for i := 0; i < n; i++ {
			out = append(out, json.RawMessage(fmt.Sprintf(`{"uri":"test://%s/%d","name":"r%d"}`, prefix, i, i)))
		}
		return out
	}
	a, b := &fakeUpstream{}, &fakeUpstream{}
	a.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true}, Resources: mk("a", 700)})
	b.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true}, Resources: mk("b", 500)})
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  a: {command: a}\n  b: {command: b}\n", map[string]*fakeUpstream{"a": a, "b": b})
	st := testState(t, p)
	seen := map[string]bool{}
	params := json.RawMessage(`{}`)
	pages := 0
	for {
		res, werr := p.surface.listResources(context.Background(), reqFor(st, "resources/list", params))
		if werr != nil {
			t.Fatal(werr)
		}
		var page struct {
			Resources []struct {
				URI string `json:"uri"`
			} `json:"resources"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page.Resources {
			if seen[r.URI] {
				t.Fatalf("%s listed twice", r.URI)
			}
			seen[r.URI] = true
		}
		if page.NextCursor == "" {
			break
		}
		params = json.RawMessage(`{"cursor":"` + page.NextCursor + `"}`)
	}
	if len(seen) != 1200 || pages != 3 || !seen["a+test://a/699"] || !seen["b+test://b/0"] {
		t.Fatalf("%d items over %d pages", len(seen), pages)
	}
	b.snap.Store(&upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true}, Resources: mk("b", 10)})
	p.Refresh()
	if _, werr := p.surface.listResources(context.Background(), reqFor(st, "resources/list", params)); werr == nil || !strings.Contains(werr.Message, "invalid or expired cursor") {
		t.Fatalf("stale cursor: %v", werr)
	}
}

// TestBareURIsWithEmptyPrefix: a prefix "" server's URIs stay bare, two such
// servers listing one URI both fall back to <server>+<uri>, and bare URIs
// a template describes route to its server.
func TestBareURIsWithEmptyPrefix(t *testing.T) {
	snap := func(uris ...string) *upstream.Snapshot {
		s := &upstream.Snapshot{State: upstream.StateConnected, Capabilities: upstream.Capabilities{Resources: true}}
		for _, u := range uris {
			s.Resources = append(s.Resources, json.RawMessage(`{"uri":"`+u+`","name":"n"}`))
		}
		return s
	}
	a, b, c := &fakeUpstream{}, &fakeUpstream{}, &fakeUpstream{}
	a.snap.Store(snap("test://only-a", "test://shared"))
	sb := snap("test://shared")
	sb.ResourceTemplates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"tpl://b/{id}","name":"t"}`)}
	b.snap.Store(sb)
	c.snap.Store(snap("test://shared"))
	p := newProxy(t, "blobs: {mode: passthrough}\nservers:\n  a: {command: a, prefix: \"\"}\n  b: {command: b, prefix: \"\"}\n  c: {command: c}\n",
		map[string]*fakeUpstream{"a": a, "b": b, "c": c})
	res, _ := p.surface.listResources(context.Background(), reqFor(testState(t, p), "resources/list", json.RawMessage(`{}`)))
	for _, want := range []string{`"test://only-a"`, `"a+test://shared"`, `"b+test://shared"`, `"c+test://shared"`} {
		if !strings.Contains(string(res), want) {
			t.Errorf("resources/list lacks %s: %s", want, res)
		}
	}
	s := p.Catalog().surface
	names := p.gen().serverNames()
	for uri, want := range map[string]string{"test://only-a": "a", "b+test://shared": "b", "tpl://b/7": "b", "c+test://shared": "c"} {
		if srv, _, _, ok := s.route(uri, names); !ok || srv != want {
			t.Errorf("route(%s) = %s, %v; want %s", uri, srv, ok, want)
		}
	}
	if srv, _, _, ok := s.route("test://unknown", names); ok {
		t.Errorf("an unknown bare URI with two bare servers routed to %s", srv)
	}
}
