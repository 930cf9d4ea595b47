package search

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"snake", "read_file", []string{"read", "file"}},
		{"server prefix", "github__create_issue", []string{"github", "create", "issue"}},
		{"kebab and dots", "get-tiny-image.v2", []string{"get", "tiny", "image", "v", "2", "v2"}},
		{"camelCase", "getTinyImage", []string{"get", "Tiny", "Image", "getTinyImage"}},
		{"acronym", "HTTPServer", []string{"HTTP", "Server", "HTTPServer"}},
		{"acronym at end", "parseURL", []string{"parse", "URL", "parseURL"}},
		{"digits", "tool_0001", []string{"tool", "0001"}},
		{"letters and digits", "s3Bucket", []string{"s", "3", "Bucket", "s3Bucket"}},
		{"base64", "base64", []string{"base", "64", "base64"}},
		{"spaces and parens", "greet (with Icons)", []string{"greet", "with", "Icons"}},
		{"brand", "GitHub", []string{"Git", "Hub", "GitHub"}},
		{"sentence", "What's in this folder?", []string{"What", "s", "in", "this", "folder"}},
		{"unicode letters", "größe_ändern", []string{"größe", "ändern"}},
		{"only punctuation", "__--..", nil},
		{"empty", "", nil},
		{"invalid utf8", "ab\xffcd", []string{"ab", "cd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			splitWords(tt.in, func(w string) { got = append(got, w) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitWords(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStem(t *testing.T) {
	tests := []struct{ in, want string }{
		// plurals
		{"files", "fil"},
		{"directories", "directory"},
		{"boxes", "box"},
		{"matches", "match"},
		{"statuses", "status"},
		{"addresses", "address"},
		{"status", "status"},
		{"analysis", "analysis"},
		// -ing, -ed, -ied
		{"creating", "creat"},
		{"created", "creat"},
		{"create", "creat"},
		{"creates", "creat"},
		{"listing", "list"},
		{"running", "run"},
		{"getting", "get"},
		{"committed", "commit"},
		{"added", "add"},
		{"copied", "copy"},
		{"replies", "reply"},
		{"string", "string"}, // no vowel left before -ing
		{"thing", "thing"},   // too short before -ing
		{"need", "need"},     // too short before -ed
		// -er
		{"folder", "fold"},
		{"folders", "fold"},
		{"filtering", "filt"},
		{"user", "user"},
		{"order", "order"},
		{"ordered", "order"},
		{"owner", "owner"},
		// final e, doubled consonant
		{"image", "imag"},
		{"images", "imag"},
		{"release", "releas"},
		{"releases", "releas"},
		{"use", "use"},
		{"pull", "pull"},
		{"add", "add"},
		// left alone
		{"git", "git"},
		{"k8s", "k8s"},
		{"größe", "größe"},
	}
	for _, tt := range tests {
		if got := stem(tt.in); got != tt.want {
			t.Errorf("stem(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAnalyzerTerms(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"stop words dropped", "show me what's in this folder", []string{"show", "directory"}},
		{"abbreviation expanded", "open a PR on my repo", []string{"open", "pull", "request", "repository"}},
		{"timezone both spellings", "timezone time zone", []string{"tim", "zon", "tim", "zon"}},
		{"case folded", "GitHub ISSUES", []string{"git", "hub", "github", "issu"}},
		{"only stop words", "what is the", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			analyzer{}.terms(tt.in, 0, func(s string) { got = append(got, s) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("terms(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAnalyzerLimits(t *testing.T) {
	var n int
	analyzer{}.terms(strings.Repeat("word ", 100), 7, func(string) { n++ })
	if n != 7 {
		t.Errorf("limit 7: got %d terms", n)
	}
	n = 0
	analyzer{}.terms(strings.Repeat("word ", maxTextBytes), 0, func(string) { n++ })
	// 8192 bytes hold 1638 "word " and a last "wo".
	if want := maxTextBytes/len("word ") + 1; n != want {
		t.Errorf("long text: got %d terms, want %d (first %d bytes)", n, want, maxTextBytes)
	}
}

func TestAnalyzeDocFields(t *testing.T) {
	tests := []struct {
		name string
		doc  Doc
		want map[int][]string
	}{
		{
			name: "server repeated in tool name counts once",
			doc:  Doc{Name: "slack__slack_post_message", Description: "Send it."},
			want: map[int][]string{
				fieldServer: {"slack"},
				fieldName:   {"post", "messag", identPrefix + "slack__slack_post_message", identPrefix + "slack_post_message"},
				fieldDesc:   {"send"},
			},
		},
		{
			name: "server word later in the name stays",
			doc:  Doc{Name: "sentry__get_sentry_issue"},
			want: map[int][]string{
				fieldServer: {"sentry"},
				fieldName:   {"get", "sentry", "issu", identPrefix + "sentry__get_sentry_issue", identPrefix + "get_sentry_issue"},
			},
		},
		{
			name: "hermes style with Server",
			doc:  Doc{Name: "mcp_github_create_issue", Server: "github"},
			want: map[int][]string{
				fieldServer: {"github"},
				fieldName:   {"creat", "issu", identPrefix + "mcp_github_create_issue"},
			},
		},
		{
			name: "parameters",
			doc: Doc{Name: "t", Schema: []byte(`{"type":"object","properties":{
				"repoPath":{"type":"string","description":"Local clone."},
				"mode":{"enum":["fast","safe",3]},
				"opts":{"type":"object","properties":{"dryRun":{"type":"boolean","description":"Only print."}}}}}`)},
			want: map[int][]string{
				fieldName:      {identPrefix + "t"},
				fieldParamName: {"mod", "opt", "dry", "run", "dryrun", "repository", "path", "repopath"},
				fieldParamDesc: {"fast", "saf", "print", "local", "clon"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[int][]string{}
			analyzeDoc(&tt.doc, func(f int, term string) { got[f] = append(got[f], term) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("analyzeDoc:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}
