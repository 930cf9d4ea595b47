package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestKeyPathsShapes: the walk reads every shape config uses: structs
// (tag name, else the lower-cased field name; "-" and unexported fields
// are none), maps of structs (<>), lists of structs ([]), and stops at a
// value that decodes itself, a scalar, a list of scalars and a map of
// anything but structs.
func TestKeyPathsShapes(t *testing.T) {
	type dur time.Duration
	type item struct {
		URI  string `yaml:"uri"`
		Name string `yaml:"name"`
	}
	type inner struct {
		Wait   Duration          `yaml:"wait"`
		Values map[string]string `yaml:"values"`
		Any    map[string]any    `yaml:"any"`
		Match  map[string]StringList
		Items  []item `yaml:"items"`
		Nested map[string]map[string]item
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
		"servers.<>.nested", "servers.<>.nested.<>.<>.uri", "servers.<>.nested.<>.<>.name",
		"listen", "listen.wait", "listen.values", "listen.any", "listen.match",
		"listen.items", "listen.items[].uri", "listen.items[].name",
		"listen.nested", "listen.nested.<>.<>.uri", "listen.nested.<>.<>.name",
		"plain",
	}
	if keys := keyPaths(reflect.TypeFor[root]()); !slices.Equal(keys, want) {
		t.Fatalf("keys\n%q\nwant\n%q", keys, want)
	}
}

// TestKeyPathsAccepted: each path KeyPaths lists is a key Parse accepts,
// and a key beside it that KeyPaths does not list is refused as unknown,
// so a list that drifted from the decoder fails here and not only in the
// docs.
func TestKeyPathsAccepted(t *testing.T) {
	keys := KeyPaths()
	for _, k := range []string{"servers", "servers.<>.timeout", "servers.<>.tools.overrides.<>.arguments", "agents.<>.limits[].burst", "listen.auth.introspection.client_secret", "tracing.sample_ratio"} {
		if !slices.Contains(keys, k) {
			t.Errorf("KeyPaths lacks %s", k)
		}
	}
	for _, k := range keys {
		if _, err := Parse(docWithKey(t, k), func(string) (string, bool) { return "", false }); errors.Is(err, ErrUnknownKey) {
			t.Errorf("%s: %v", k, err)
		}
		if _, err := Parse(docWithKey(t, k+"_not_a_key"), func(string) (string, bool) { return "", false }); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%s_not_a_key accepted: %v", k, err)
		}
	}
}

// docWithKey is a config document that holds the key path k, set to null,
// with "x" for a user's name (<>) and one item for a list ([]).
func docWithKey(t *testing.T, k string) []byte {
	t.Helper()
	var build func(segs []string) any
	build = func(segs []string) any {
		if len(segs) == 0 {
			return nil
		}
		name, list := strings.CutSuffix(segs[0], "[]")
		if name == "<>" {
			name = "x"
		}
		var v any = build(segs[1:])
		if list {
			v = []any{v}
		}
		return map[string]any{name: v}
	}
	out, err := yaml.Marshal(build(strings.Split(k, ".")))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
