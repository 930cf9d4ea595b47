package blobs

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// newTestMaterializer returns a Materializer writing under a fresh <tmp>/blobs.
func newTestMaterializer(t testing.TB, media bool) (*Materializer, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobs")
	m, err := New(Options{Dir: dir, MaterializeMedia: media})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, dir
}

// jstr encodes s as a JSON string.
func jstr(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// resourceItem is a resource content item holding data as a blob.
func resourceItem(uri, mimeType string, data []byte) string {
	fields := []string{`"blob":` + jstr(base64.StdEncoding.EncodeToString(data))}
	if uri != "" {
		fields = append(fields, `"uri":`+jstr(uri))
	}
	if mimeType != "" {
		fields = append(fields, `"mimeType":`+jstr(mimeType))
	}
	return `{"type":"resource","resource":{` + strings.Join(fields, ",") + `}}`
}

// mediaItem is an image or audio content item.
func mediaItem(typ, mimeType string, data []byte) string {
	return `{"type":` + jstr(typ) + `,"data":` + jstr(base64.StdEncoding.EncodeToString(data)) + `,"mimeType":` + jstr(mimeType) + `}`
}

// resultOf wraps items in a result object.
func resultOf(items ...string) json.RawMessage {
	return json.RawMessage(`{"content":[` + strings.Join(items, ",") + `]}`)
}

// contentOf decodes the content array of a rewritten result, failing on invalid JSON.
func contentOf(t testing.TB, raw []byte) []map[string]any {
	t.Helper()
	var r struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("output is not valid JSON: %v\n%s", err, raw)
	}
	return r.Content
}

// textsOf returns the text of every text item, in order.
func textsOf(t testing.TB, raw []byte) []string {
	t.Helper()
	var out []string
	for _, it := range contentOf(t, raw) {
		if it["type"] == "text" {
			out = append(out, it["text"].(string))
		}
	}
	return out
}

// shaName is the file name a content gets.
func shaName(data []byte, ext string) string {
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	if ext != "" {
		name += "." + ext
	}
	return name
}

// treeOf lists every path under root (relative, sorted), symlinks not followed.
func treeOf(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel != "." {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("walk %s: %v", root, err)
	}
	sort.Strings(out)
	return out
}

// results lists the Result of every outcome.
func results(rep Report) []string {
	out := make([]string, len(rep.Blobs))
	for i, o := range rep.Blobs {
		out[i] = o.Result
	}
	return out
}

// repeat returns n copies of s.
func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
