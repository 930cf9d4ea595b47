package namespace

import "testing"

func TestURIPrefix(t *testing.T) {
	tests := map[string]string{
		"filesystem":  "filesystem",
		"My_Server-1": "my-server-1",
		"a_b":         "a-b",
		"ABC":         "abc",
	}
	for in, want := range tests {
		if got := URIPrefix(in); got != want {
			t.Errorf("URIPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWrap(t *testing.T) {
	if got, want := WrapURI("filesystem", "file:///srv/notes.txt"), "filesystem+file:///srv/notes.txt"; got != want {
		t.Errorf("WrapURI = %q, want %q", got, want)
	}
	if got, want := WrapURI("My_Files", "file:///a"), "my-files+file:///a"; got != want {
		t.Errorf("WrapURI = %q, want %q", got, want)
	}
	if got, want := WrapSeedURI("My_Files", "file:///a"), "My_Files__file:///a"; got != want {
		t.Errorf("WrapSeedURI = %q, want %q", got, want)
	}
}

var uriServers = []string{"filesystem", "my_srv", "Big-Name", "a", "a_", "git", "x-"}

func TestURIRoundTrip(t *testing.T) {
	uris := []string{
		"file:///srv/notes.txt",
		"git+ssh://host/repo.git",
		"a+b+c",
		"x__y",
		"__leading",
		"x__y+z__w",
		"+",
		"",
		"db://table?q=1#frag",
		"unicode:///日本",
	}
	for _, server := range uriServers {
		for _, uri := range uris {
			if server == "a" && len(uri) > 0 && uri[0] == '_' {
				continue // ambiguous with "a_" in the seed form; see TestParseURI
			}
			for _, form := range []struct {
				name string
				wrap func(string, string) string
			}{{"native", WrapURI}, {"seed", WrapSeedURI}} {
				w := form.wrap(server, uri)
				s, o, ok := ParseURI(w, uriServers)
				if !ok || s != server || o != uri {
					t.Errorf("%s: ParseURI(%q) = %q, %q, %v; want %q, %q", form.name, w, s, o, ok, server, uri)
				}
			}
		}
	}
}

func TestParseURI(t *testing.T) {
	tests := []struct {
		name     string
		uri      string
		servers  []string
		server   string
		original string
		ok       bool
	}{
		{"native", "filesystem+file:///x", uriServers, "filesystem", "file:///x", true},
		{"native underscore server", "my-srv+file:///x", uriServers, "my_srv", "file:///x", true},
		{"native ignores ASCII case", "FileSystem+file:///x", uriServers, "filesystem", "file:///x", true},
		{"native mixed-case server", "big-name+mem://k", uriServers, "Big-Name", "mem://k", true},
		{"native no Unicode folding", "\u212a+x", []string{"k"}, "", "", false},
		{"native keeps later plus", "git+git+ssh://h", uriServers, "git", "git+ssh://h", true},
		{"native empty original", "git+", uriServers, "git", "", true},
		{"seed", "filesystem__file:///x", uriServers, "filesystem", "file:///x", true},
		{"seed is case-sensitive", "FILESYSTEM__file:///x", uriServers, "", "", false},
		{"seed underscore server", "my_srv__file:///x", uriServers, "my_srv", "file:///x", true},
		{"seed server ending in dash", "x-__u", uriServers, "x-", "u", true},
		{"seed longest server wins", "a___x", uriServers, "a_", "x", true},
		{"seed shorter server", "a__x", uriServers, "a", "x", true},
		{"seed keeps later separators", "a__b__c", uriServers, "a", "b__c", true},
		{"unknown server", "other+file:///x", uriServers, "", "", false},
		{"unknown seed server", "other__file:///x", uriServers, "", "", false},
		{"no separator", "file:///x", uriServers, "", "", false},
		{"empty", "", uriServers, "", "", false},
		{"empty prefix", "+file:///x", uriServers, "", "", false},
		{"no servers", "git+x", nil, "", "", false},
		{"empty server names ignored", "__x", []string{""}, "", "", false},
		{"ambiguous native prefix refused", "a-b+x", []string{"a_b", "a-b"}, "", "", false},
		{"duplicate server listed twice", "a-b+x", []string{"a_b", "a_b"}, "a_b", "x", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, o, ok := ParseURI(tc.uri, tc.servers)
			if s != tc.server || o != tc.original || ok != tc.ok {
				t.Errorf("ParseURI(%q) = %q, %q, %v; want %q, %q, %v", tc.uri, s, o, ok, tc.server, tc.original, tc.ok)
			}
		})
	}
}
