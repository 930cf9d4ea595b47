package downstream

import (
	"encoding/json"
	"testing"
)

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
