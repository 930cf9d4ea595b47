package override

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

func compile(t testing.TB, o *config.ToolOverride) *Tool {
	t.Helper()
	tool, err := Compile(o)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestApply(t *testing.T) {
	const upstream = `{"name":"create_issue", "title":"Create", "description":"Creates an issue.",` +
		`"inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string","maxLength":1e400}},` +
		`"required":["owner","repo","title"]},"annotations":{"title":"Create","destructiveHint":true},"_meta":{"k":18446744073709551615}}`
	tests := []struct {
		name     string
		tool     string
		override config.ToolOverride
		want     string
		readOnly bool
		missing  string
	}{
		{
			name:     "title also replaces annotations.title",
			tool:     upstream,
			override: config.ToolOverride{Title: "New issue"},
			want: `{"name":"create_issue", "title":"New issue", "description":"Creates an issue.",` +
				`"inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string","maxLength":1e400}},` +
				`"required":["owner","repo","title"]},"annotations":{"title":"New issue","destructiveHint":true},"_meta":{"k":18446744073709551615}}`,
		},
		{
			name:     "description, annotations merged and removed, pins cut",
			tool:     upstream,
			override: config.ToolOverride{Description: "Opens an issue in <our> repo.", Annotations: map[string]any{"readOnlyHint": true, "destructiveHint": nil}, Arguments: map[string]any{"owner": "o", "repo": "r"}},
			want: `{"name":"create_issue", "title":"Create", "description":"Opens an issue in <our> repo.",` +
				`"inputSchema":{"type":"object","properties":{"title":{"type":"string","maxLength":1e400}},` +
				`"required":["title"]},"annotations":{"title":"Create","readOnlyHint":true},"_meta":{"k":18446744073709551615}}`,
			readOnly: true,
		},
		{
			name:     "annotations added where the upstream had none; a pin it does not declare is missing",
			tool:     `{"name":"x","inputSchema":{"type":"object","properties":{"a":{}},"required":["a"]}}`,
			override: config.ToolOverride{Annotations: map[string]any{"readOnlyHint": false, "idempotentHint": true}, Arguments: map[string]any{"a": 1, "zz": "z"}},
			want:     `{"name":"x","inputSchema":{"type":"object","properties":{}},"annotations":{"idempotentHint":true,"readOnlyHint":false}}`,
			missing:  "zz",
		},
		{
			name:     "a tool without an inputSchema keeps its bytes, every pin missing",
			tool:     `{"name":"x","annotations":{"readOnlyHint":true}}`,
			override: config.ToolOverride{Arguments: map[string]any{"b": 1, "a": 2}},
			want:     `{"name":"x","annotations":{"readOnlyHint":true}}`,
			readOnly: true,
			missing:  "a,b",
		},
		{
			name:     "a read-only hint given twice counts as none, as the upstream package reads it",
			tool:     `{"name":"x","annotations":{"readOnlyHint":true,"readOnlyHint":false}}`,
			override: config.ToolOverride{Description: "X."},
			want:     `{"name":"x","annotations":{"readOnlyHint":true,"readOnlyHint":false},"description":"X."}`,
			readOnly: false,
		},
		{
			name:     "annotations that are not an object are replaced",
			tool:     `{"name":"x","annotations":"weird"}`,
			override: config.ToolOverride{Annotations: map[string]any{"openWorldHint": false}},
			want:     `{"name":"x","annotations":{"openWorldHint":false}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.tool)
			got, err := compile(t, &tt.override).Apply(in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Raw) != tt.want {
				t.Errorf("Raw =\n%s\nwant\n%s", got.Raw, tt.want)
			}
			if got.ReadOnly != tt.readOnly {
				t.Errorf("ReadOnly = %v", got.ReadOnly)
			}
			if m := strings.Join(got.Missing, ","); m != tt.missing {
				t.Errorf("Missing = %q, want %q", m, tt.missing)
			}
			if string(in) != tt.tool {
				t.Error("input modified")
			}
		})
	}
	if _, err := compile(t, &config.ToolOverride{Title: "x"}).Apply([]byte(`[1]`)); err == nil {
		t.Error("Apply on an array succeeded")
	}
}

func TestArguments(t *testing.T) {
	tool := compile(t, &config.ToolOverride{Arguments: map[string]any{"repo": "mcp-proxy", "owner": "o", "n": 2.5}})
	tests := []struct {
		name, args, want, refused string
	}{
		{"no arguments", ``, `{"n":2.5,"owner":"o","repo":"mcp-proxy"}`, ""},
		{"null", `null`, `{"n":2.5,"owner":"o","repo":"mcp-proxy"}`, ""},
		{"empty object", `{ }`, `{"n":2.5,"owner":"o","repo":"mcp-proxy" }`, ""},
		{"client members keep their bytes", `{"title":"x\u00e9", "big":1e400 }`, `{"title":"x\u00e9", "big":1e400,"n":2.5,"owner":"o","repo":"mcp-proxy" }`, ""},
		{"a pinned parameter is refused", `{"repo":"other","owner":"o","repo":"again"}`, "", "owner,repo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, refused, err := tool.Arguments(json.RawMessage(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if r := strings.Join(refused, ","); r != tt.refused {
				t.Fatalf("refused = %q, want %q", r, tt.refused)
			}
			if string(got) != tt.want {
				t.Fatalf("Arguments = %s, want %s", got, tt.want)
			}
			if got != nil && !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
		})
	}
	if _, _, err := tool.Arguments(json.RawMessage(`[1]`)); err == nil {
		t.Error("an array was taken for arguments")
	}
	plain := compile(t, &config.ToolOverride{Title: "t"})
	if got, refused, err := plain.Arguments(json.RawMessage(`{"a":1}`)); string(got) != `{"a":1}` || refused != nil || err != nil {
		t.Errorf("without pins: %s %v %v", got, refused, err)
	}
}

func TestCutParameters(t *testing.T) {
	tests := []struct {
		name, schema, want, missing string
		names                       []string
	}{
		{"required emptied goes", `{"type":"object","required":["a"],"properties":{"a":{},"b":{}}}`, `{"type":"object","properties":{"b":{}}}`, "", []string{"a"}},
		{"escaped names match", `{"properties":{"r\u0065po":{}},"required":["re\u0070o", "x"]}`, `{"properties":{},"required":["x"]}`, "", []string{"repo"}},
		{"duplicates all go", `{"properties":{"a":1,"b":2,"a":3}}`, `{"properties":{"b":2}}`, "", []string{"a"}},
		{"not in properties", `{"properties":{"a":{}},"required":["q"]}`, `{"properties":{"a":{}}}`, "q", []string{"q"}},
		{"odd members left alone", `{"properties":[1],"required":"a"}`, `{"properties":[1],"required":"a"}`, "a", []string{"a"}},
		{"nested schemas untouched", `{"properties":{"a":{"properties":{"b":{}}}},"$defs":{"b":{}}}`, `{"properties":{"a":{"properties":{"b":{}}}},"$defs":{"b":{}}}`, "b", []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, missing, err := CutParameters(json.RawMessage(tt.schema), tt.names)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("CutParameters = %s, want %s", got, tt.want)
			}
			if m := strings.Join(missing, ","); m != tt.missing {
				t.Errorf("missing = %q, want %q", m, tt.missing)
			}
		})
	}
}
