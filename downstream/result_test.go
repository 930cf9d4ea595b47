package downstream

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

func TestTypedResultKeepsBytes(t *testing.T) {
	const content = `[{"type":"text","text":"a","x-new":1},{"type":"x-future","data":[1,2.50]},{"type":"image","data":"AAAA","mimeType":"image/png"}]`
	raw := `{"content":` + content + `,"structuredContent":{"n":18446744073709551615},"isError":true,` +
		`"_meta":{"k":{"deep":[1,2.50]},"s":"v"},"unknown":1}`
	r, err := typedResult(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("typedResult: %v", err)
	}
	if !r.IsError {
		t.Error("IsError = false")
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	get := func(obj []byte, key string) string {
		v, _, err := rawjson.Get(obj, key)
		if err != nil {
			t.Fatalf("get %s from %s: %v", key, obj, err)
		}
		return string(v)
	}
	if got := get(b, "content"); got != content {
		t.Errorf("content =\n%s\nwant\n%s", got, content)
	}
	if got := get(b, "structuredContent"); got != `{"n":18446744073709551615}` {
		t.Errorf("structuredContent = %s", got)
	}
	meta := []byte(get(b, "_meta"))
	if got := get(meta, "k"); got != `{"deep":[1,2.50]}` {
		t.Errorf("_meta.k = %s", got)
	}
	if got := get(meta, "s"); got != `"v"` {
		t.Errorf("_meta.s = %s", got)
	}
}

func TestTypedResultEmptyAndInvalid(t *testing.T) {
	r, err := typedResult(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Content == nil || len(r.Content) != 0 || r.Meta != nil || r.IsError {
		t.Errorf("typedResult({}) = %+v", r)
	}
	for _, bad := range []string{`[]`, `{"content":{}}`, `not json`, `{"isError":"yes"}`} {
		_, err := typedResult(json.RawMessage(bad))
		var werr *wireError
		if !errors.As(err, &werr) || werr.Code != codeInternal {
			t.Errorf("typedResult(%s) error = %v, want a -32603 wire error", bad, err)
		}
	}
}

func TestStripResultTags(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means: the same slice comes back
	}{
		{name: "no tags", in: `{"content":[{"type":"text","text":"plain \u00e9"}],"isError":false}`},
		{
			name: "UTF-8 tags in text",
			in:   "{\"content\":[{\"type\":\"text\",\"text\":\"hi\U000E0041\U000E007F there\",\"annotations\":{\"priority\":1}},{\"type\":\"text\",\"text\":\"ok\"}],\"x\":[1, 2]}",
			want: `{"content":[{"type":"text","text":"hi there","annotations":{"priority":1}},{"type":"text","text":"ok"}],"x":[1, 2]}`,
		},
		{
			name: "escaped tags in text",
			in:   `{"content":[{"type":"text","text":"a\uDB40\uDC41b\udb40\udc42c"}],"structuredContent":{"k":1}}`,
			want: `{"content":[{"type":"text","text":"abc"}],"structuredContent":{"k":1}}`,
		},
		{
			name: "embedded resource text",
			in:   `{"content":[{"type":"resource","resource":{"uri":"file:///x","mimeType":"text/plain","text":"a\uDB40\uDC41b"}}]}`,
			want: `{"content":[{"type":"resource","resource":{"uri":"file:///x","mimeType":"text/plain","text":"ab"}}]}`,
		},
		{
			name: "tags outside text stay",
			in:   `{"content":[{"type":"text","text":"clean"}],"structuredContent":{"s":"a\uDB40\uDC41b"},"_meta":{"t":"\uDB40\uDC41"}}`,
		},
		{
			name: "blob resource untouched",
			in:   `{"content":[{"type":"resource","resource":{"uri":"file:///x","blob":"AAAA","note":"\uDB40\uDC41"}}]}`,
		},
		{name: "content not an array", in: `{"content":{"text":"\uDB40\uDC41"}}`},
		{name: "text not a string", in: `{"content":[{"type":"text","text":["\uDB40\uDC41"]}]}`},
		{name: "a lone high surrogate escape is not a TAG", in: `{"content":[{"type":"text","text":"\uDB40x"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := json.RawMessage(tt.in)
			got := stripResultTags(in)
			if tt.want == "" {
				if !sameBytes(got, in) {
					t.Errorf("stripResultTags = %s, want the same slice", got)
				}
				return
			}
			if string(got) != tt.want {
				t.Errorf("stripResultTags =\n%s\nwant\n%s", got, tt.want)
			}
			if string(in) != tt.in {
				t.Error("stripResultTags modified its input")
			}
		})
	}
}

func TestMayHaveTags(t *testing.T) {
	for _, s := range []string{"\U000E0001", "\U000E007F", `\uDB40\uDC41`, `\udb40`, `x\uDb40`} {
		if !mayHaveTags([]byte(s)) {
			t.Errorf("mayHaveTags(%q) = false", s)
		}
	}
	for _, s := range []string{"", "plain", `\u0041`, `\uDB4`, `\u`, "\U000E0100"} {
		if mayHaveTags([]byte(s)) {
			t.Errorf("mayHaveTags(%q) = true", s)
		}
	}
}

func FuzzStripResultTags(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"a\uDB40\uDC41b"}]}`))
	f.Add([]byte("{\"content\":[{\"type\":\"resource\",\"resource\":{\"text\":\"\U000E0041\"}}]}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := append([]byte(nil), in...)
		out := stripResultTags(in)
		if string(in) != string(orig) {
			t.Fatal("input modified")
		}
		if !sameBytes(out, in) && json.Valid(in) && !json.Valid(out) {
			t.Fatalf("valid %q became invalid %q", in, out)
		}
	})
}
