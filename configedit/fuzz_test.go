package configedit

import (
	"bytes"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzAddServer: whatever the file, AddServer refuses it or returns YAML
// whose servers hold the new entry, with every old line kept unless it
// says a line changed.
func FuzzAddServer(f *testing.F) {
	f.Add([]byte("servers:\n  a:\n    command: a\n\n# c\nlog: {}\n"))
	f.Add([]byte("servers: {}\n"))
	f.Add([]byte("servers: {\n  a: {command: a}\n}\n"))
	f.Add([]byte("# only a comment"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var before struct {
			Servers map[string]any `yaml:"servers"`
		}
		if yaml.Unmarshal(in, &before) != nil || bytes.Contains(in, []byte("\r")) || bytes.Contains(in, []byte("\t")) {
			return
		}
		if _, ok := before.Servers["weather"]; ok {
			return
		}
		out, changed, err := AddServer(in, entry{})
		if err != nil {
			return
		}
		var after struct {
			Servers map[string]any `yaml:"servers"`
		}
		if err := yaml.Unmarshal(out, &after); err != nil {
			t.Fatalf("result does not parse: %v\n--- in\n%s\n--- out\n%s", err, in, out)
		}
		if _, ok := after.Servers["weather"]; !ok {
			t.Fatalf("no weather entry\n--- in\n%s\n--- out\n%s", in, out)
		}
		if !changed && !onlyAdded(string(bytes.TrimSuffix(in, []byte("\n"))), string(out)) {
			t.Fatalf("a line changed\n--- in\n%s\n--- out\n%s", in, out)
		}
	})
}
