package search

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseSelect(t *testing.T) {
	tests := []struct {
		name   string
		query  string
		want   []string
		wantOK bool
	}{
		{"two names", "select:a,b", []string{"a", "b"}, true},
		{"spaces", "  select: a , b  ", []string{"a", "b"}, true},
		{"empty names dropped", "select:a,,b,", []string{"a", "b"}, true},
		{"duplicates dropped", "select:b,a,b", []string{"b", "a"}, true},
		{"no names", "select:", nil, true},
		{"only commas", "select: , ,", nil, true},
		{"letter case", "SELECT:github__create_issue", []string{"github__create_issue"}, true},
		{"names keep case", "select:GitHub__X", []string{"GitHub__X"}, true},
		{"keyword query", "select a file", nil, false},
		{"prefix later", "please select:a", nil, false},
		{"empty", "", nil, false},
		{"short", "sel", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseSelect(tt.query)
			if ok != tt.wantOK || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseSelect(%q) = %q, %v; want %q, %v", tt.query, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	docs := []*Doc{
		{Name: "fs__read", Description: "Read a file", Schema: []byte("{\n  \"type\": \"object\",\n  \"properties\": {\"path\": {\"type\": \"string\"}}\n}")},
		{Name: "fs__odd", Description: "Quote \" and\nnewline <b>&</b>", Schema: []byte(`{"z":1,"a":"<x>"}`)},
		{Name: "fs__none", Description: ""},
		{Name: "fs__bad", Description: "bad", Schema: []byte(`{"type":`)},
		{Name: "fs__array", Description: "array", Schema: []byte(`[]`)},
		{Name: "fs__utf8", Description: "bad \xff byte", Schema: []byte("{\"d\":\"\xfe\"}")},
	}
	want := "<functions>\n" +
		`<function>{"name": "fs__read", "description": "Read a file", "parameters": {"type":"object","properties":{"path":{"type":"string"}}}}</function>` + "\n" +
		`<function>{"name": "fs__odd", "description": "Quote \" and\nnewline \u003cb\u003e\u0026\u003c/b\u003e", "parameters": {"z":1,"a":"\u003cx\u003e"}}</function>` + "\n" +
		`<function>{"name": "fs__none", "description": "", "parameters": {"type":"object"}}</function>` + "\n" +
		`<function>{"name": "fs__bad", "description": "bad", "parameters": {"type":"object"}}</function>` + "\n" +
		`<function>{"name": "fs__array", "description": "array", "parameters": {"type":"object"}}</function>` + "\n" +
		`<function>{"name": "fs__utf8", "description": "bad \ufffd byte", "parameters": {"d":"` + "\uFFFD" + `"}}</function>` + "\n" +
		"</functions>\n"
	got := Format(append(docs, nil))
	if got != want {
		t.Fatalf("Format:\n got %s\nwant %s", got, want)
	}
	// Every line between the tags is one valid JSON object with the three
	// members, the parameters an object.
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	for _, line := range lines[1 : len(lines)-1] {
		checkFunctionLine(t, line)
	}
	if got := Format(nil); got != "<functions>\n</functions>\n" {
		t.Errorf("Format(nil) = %q", got)
	}
}

// checkFunctionLine fails unless line is <function>JSON</function> with a
// name string, a description string and an object of parameters.
func checkFunctionLine(t *testing.T, line string) {
	t.Helper()
	body, ok := strings.CutPrefix(line, "<function>")
	if !ok {
		t.Fatalf("line %q lacks <function>", line)
	}
	body, ok = strings.CutSuffix(body, "</function>")
	if !ok || strings.Contains(body, "<") {
		t.Fatalf("line %q: bad framing", line)
	}
	var f struct {
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	if f.Name == nil || f.Description == nil || len(f.Parameters) == 0 || f.Parameters[0] != '{' {
		t.Fatalf("line %q: missing members", line)
	}
}

func TestFormatSelect(t *testing.T) {
	found := []*Doc{{Name: "a__x", Description: "X", Schema: []byte(`{}`)}}
	want := "<functions>\n" + `<function>{"name": "a__x", "description": "X", "parameters": {}}</function>` + "\n</functions>\n\nNot found: b__y, c"
	if got := FormatSelect(found, []string{"b__y", "c"}); got != want {
		t.Errorf("FormatSelect:\n got %q\nwant %q", got, want)
	}
	if got := FormatSelect(found, nil); got != Format(found) {
		t.Errorf("FormatSelect without misses = %q", got)
	}
	if got := FormatSelect(nil, []string{"z"}); got != "<functions>\n</functions>\n\nNot found: z" {
		t.Errorf("FormatSelect nothing found = %q", got)
	}
}

func TestDeferredList(t *testing.T) {
	long := strings.Repeat("é", maxListingLine+5)
	docs := []*Doc{
		{Name: "fs__read", Description: "Read a file.\nMore detail."},
		{Name: "fs__blank_first", Description: "\n\n  Second line first.  \r\nThird"},
		{Name: "fs__none"},
		nil,
		{Name: "fs__long", Description: long},
	}
	want := "<available-deferred-tools>\n" +
		"fs__read - Read a file.\n" +
		"fs__blank_first - Second line first.\n" +
		"fs__none\n" +
		"fs__long - " + strings.Repeat("é", maxListingLine) + "...\n" +
		"</available-deferred-tools>\n"
	if got := DeferredList(docs); got != want {
		t.Errorf("DeferredList:\n got %q\nwant %q", got, want)
	}
}

func TestFirstLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"one", "one"},
		{"  one  \ntwo", "one"},
		{"\r\n \n two", "two"},
		{"bad \xff", "bad \uFFFD"},
		{strings.Repeat("a", maxListingLine), strings.Repeat("a", maxListingLine)},
		{strings.Repeat("a", maxListingLine+1), strings.Repeat("a", maxListingLine) + "..."},
	}
	for _, tt := range tests {
		if got := FirstLine(tt.in); got != tt.want {
			t.Errorf("FirstLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
