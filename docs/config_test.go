package docs

import (
	"io/fs"
	"regexp"
	"slices"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/config"
)

var (
	codeRE        = regexp.MustCompile("`([^`]+)`")
	placeholderRE = regexp.MustCompile(`<[^<>]+>`)
)

// undocumentedKeys returns the keys that doc does not write as a code span
// of their own (`servers.<server>.timeout`; any <name> stands for <>).
func undocumentedKeys(keys []string, doc string) []string {
	spans := map[string]bool{}
	for _, m := range codeRE.FindAllStringSubmatch(doc, -1) {
		spans[placeholderRE.ReplaceAllString(m[1], "<>")] = true
	}
	var missing []string
	for _, k := range keys {
		if !spans[k] {
			missing = append(missing, k)
		}
	}
	return missing
}

// TestConfigKeysDocumented: every key config.Config accepts has a row in
// docs/configuration.md. The keys are config.KeyPaths, which the config
// package tests against its decoder.
func TestConfigKeysDocumented(t *testing.T) {
	keys := config.KeyPaths()
	// A sample the list must hold, so that an empty list could not pass.
	for _, k := range []string{"servers", "servers.<>.timeout", "servers.<>.tools.overrides.<>.arguments", "agents.<>.limits[].burst", "listen.auth.introspection.client_secret", "tracing.sample_ratio"} {
		if !slices.Contains(keys, k) {
			t.Errorf("config.KeyPaths lacks %s", k)
		}
	}
	doc, err := fs.ReadFile(repo, "docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range undocumentedKeys(keys, string(doc)) {
		t.Errorf("config key %s is not documented in docs/configuration.md (write it as `%s`, with <name> for a name the user chooses)", k, k)
	}
}

// TestUndocumentedKeys: a key written only in prose, or only as part of
// a longer key, is reported; one in a code span of its own, with any
// <name> for a name, is not.
func TestUndocumentedKeys(t *testing.T) {
	keys := []string{"servers", "servers.<>.wait", "servers.<>.items[].uri", "listen.items[].name", "plain"}
	doc := "| `servers` | … |\n| `servers.<server>.wait` | … |\n`servers.<s>.items[].uri` `plain`; " +
		"listen.items[].name only in prose, and `listen.items[].names`"
	if got := undocumentedKeys(keys, doc); !slices.Equal(got, []string{"listen.items[].name"}) {
		t.Errorf("undocumented %q, want [listen.items[].name]", got)
	}
	if got := undocumentedKeys(keys, doc+" `listen.items[].name`"); len(got) != 0 {
		t.Errorf("undocumented %q, want none", got)
	}
}
