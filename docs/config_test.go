package docs

import (
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcp-proxy/mcp-proxy/config"
)

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// configKeys returns the path of every key the strict decoder accepts in a
// document decoded into t, derived from the yaml tags as yaml.v3 reads them:
// a struct's exported fields are keys (tag name, else the lower-cased field
// name; "-" is none); a map of structs holds names the user chooses, written
// <> in the path; a list of structs is written []. A type that decodes
// itself (yaml.Unmarshaler), a scalar, a list of scalars and a map of
// anything but structs end the path: their insides are values, not keys.
func configKeys(t reflect.Type) []string {
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if name == "-" {
					continue
				}
				if name == "" {
					name = strings.ToLower(f.Name)
				}
				key := name
				if prefix != "" {
					key = prefix + "." + name
				}
				keys = append(keys, key)
				walk(f.Type, key)
			}
		case reflect.Map:
			if isStruct(t.Elem()) {
				walk(t.Elem(), prefix+".<>")
			}
		case reflect.Slice:
			if isStruct(t.Elem()) {
				walk(t.Elem(), prefix+"[]")
			}
		}
	}
	walk(t, "")
	return keys
}

// isStruct reports whether t, or what it points to, is a struct that does
// not decode itself.
func isStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerType)
}

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
// docs/configuration.md.
func TestConfigKeysDocumented(t *testing.T) {
	keys := configKeys(reflect.TypeFor[config.Config]())
	// A sample the walk must find, so that a walk that found nothing (or
	// stopped at the first map) could not pass.
	for _, k := range []string{"servers", "servers.<>.timeout", "servers.<>.tools.overrides.<>.arguments", "agents.<>.limits[].burst", "listen.auth.introspection.client_secret", "tracing.sample_ratio"} {
		if !slices.Contains(keys, k) {
			t.Errorf("configKeys did not find %s", k)
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

// TestConfigKeysCatchBreakage: the walk reads the shapes config uses, and
// a key missing from the page is reported.
func TestConfigKeysCatchBreakage(t *testing.T) {
	type dur time.Duration
	type item struct {
		URI  string `yaml:"uri"`
		Name string `yaml:"name"`
	}
	type inner struct {
		Wait   config.Duration   `yaml:"wait"`
		Values map[string]string `yaml:"values"`
		Any    map[string]any    `yaml:"any"`
		Match  map[string]config.StringList
		Items  []item `yaml:"items"`
		Skip   string `yaml:"-"`
		hidden int
	}
	type root struct {
		Servers map[string]*inner `yaml:"servers"`
		Listen  *inner            `yaml:"listen,omitempty"`
		Plain   dur               `yaml:"plain"`
	}
	want := []string{
		"servers", "servers.<>.wait", "servers.<>.values", "servers.<>.any", "servers.<>.match",
		"servers.<>.items", "servers.<>.items[].uri", "servers.<>.items[].name",
		"listen", "listen.wait", "listen.values", "listen.any", "listen.match",
		"listen.items", "listen.items[].uri", "listen.items[].name",
		"plain",
	}
	keys := configKeys(reflect.TypeFor[root]())
	if !slices.Equal(keys, want) {
		t.Fatalf("keys\n%q\nwant\n%q", keys, want)
	}

	doc := "| `servers` | … |\n| `servers.<server>.wait` | … |\n`servers.<s>.values` `servers.<s>.any` `servers.<s>.match` `servers.<s>.items` " +
		"`servers.<s>.items[].uri` `servers.<s>.items[].name` `listen` `listen.wait` `listen.values` `listen.any` `listen.match` `listen.items` " +
		"`listen.items[].uri` `plain`; listen.items[].name only in prose, and `servers.<s>.items[].names`"
	if got := undocumentedKeys(keys, doc); !slices.Equal(got, []string{"listen.items[].name"}) {
		t.Errorf("undocumented %q, want [listen.items[].name]", got)
	}
	if got := undocumentedKeys(keys, doc+" `listen.items[].name`"); len(got) != 0 {
		t.Errorf("undocumented %q, want none", got)
	}
}
