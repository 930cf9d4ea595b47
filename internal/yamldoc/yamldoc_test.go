package yamldoc

import (
	"errors"
	"io"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestFirst(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		doc        bool   // a document is returned
		err        string // yaml.v3's error, "" for none
		next       bool   // a second document follows
	}{
		{name: "nothing", data: ""},
		{name: "only a comment", data: "# servers come later\n"},
		{name: "a mapping", data: "servers: {}\n", doc: true},
		{name: "an empty document", data: "---\n", doc: true},
		{name: "two documents", data: "a: 1\n---\nb: 2\n", doc: true, next: true},
		{name: "not YAML", data: "a: [1\n", err: "yaml: line 1: did not find expected ',' or ']'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, dec, err := First([]byte(tc.data))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || doc != nil {
					t.Fatalf("First = %v, %v; want the error %q", doc, err, tc.err)
				}
				return
			}
			if err != nil || (doc != nil) != tc.doc {
				t.Fatalf("First = %v, %v; want a document: %v", doc, err, tc.doc)
			}
			if doc != nil && doc.Kind != yaml.DocumentNode {
				t.Fatalf("kind %v, want a document node", doc.Kind)
			}
			var next yaml.Node
			if err := dec.Decode(&next); (err == nil) != tc.next || err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("decoding on: %v; want a second document: %v", err, tc.next)
			}
		})
	}
}
