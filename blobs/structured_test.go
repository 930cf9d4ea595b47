package blobs

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestRewriteStructuredContent: a string in structuredContent equal to the data of a blob that
// was written becomes the blob's reference text, wherever it is nested and however it is
// escaped; keys, other values, strings equal to a blob that was not written, and everything
// outside structuredContent stay as they came (docs/resources.md#blobs).
func TestRewriteStructuredContent(t *testing.T) {
	m, dir := newTestMaterializer(t, true)
	img := []byte("\xfb\xff\xfe png bytes \xff\xff") // base64 holds "+" and "/"
	doc := []byte("a document")
	b64 := base64.StdEncoding.EncodeToString(img)
	if !strings.Contains(b64, "/") {
		t.Fatalf("test data: %s has no /", b64)
	}
	escaped := strings.ReplaceAll(b64, "/", `\/`)
	docB64 := base64.StdEncoding.EncodeToString(doc)
	bad := "!!!!"
	in := `{"content":[` + mediaItem("image", "image/png", img) + `,` + resourceItem("file:///d/notes.txt", "text/plain", doc) +
		`,{"type":"resource","resource":{"blob":"` + bad + `"}}],` +
		`"_meta":{"copy":"` + b64 + `"},` +
		`"structuredContent": {"content":[{"type":"image","data":"` + escaped + `","mimeType":"image/png"}],` +
		`"` + b64 + `": 1, "list": [ "` + docB64 + `" , 7, "` + bad + `", "` + b64 + `x", true, {"deep":[["` + b64 + `"]]} ],` +
		`"text":"keep me"}}`
	out, rep, err := m.Rewrite("a", json.RawMessage(in), true)
	if err != nil {
		t.Fatal(err)
	}
	if got := results(rep); strings.Join(got, ",") != "written,written,invalid" {
		t.Fatalf("results %v", got)
	}
	imgRef := "[IMAGE:" + filepath.Join(dir, "a", shaName(img, "png")) + "]"
	docRef := "[Document: notes.txt] " + filepath.Join(dir, "a", shaName(doc, "txt"))
	var res struct {
		Meta       map[string]any `json:"_meta"`
		Structured map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	want := map[string]any{
		"content": []any{map[string]any{"type": "image", "data": imgRef, "mimeType": "image/png"}},
		b64:       1.0,
		"list":    []any{docRef, 7.0, bad, b64 + "x", true, map[string]any{"deep": []any{[]any{imgRef}}}},
		"text":    "keep me",
	}
	gotJSON, _ := json.Marshal(res.Structured)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("structuredContent\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if res.Meta["copy"] != b64 {
		t.Errorf("_meta changed: %v", res.Meta)
	}
	// Only the strings changed: the bytes around them are the input's.
	if !strings.Contains(string(out), `"structuredContent": {"content":[{"type":"image","data":"[IMAGE:`) ||
		!strings.Contains(string(out), `"list": [ "[Document: notes.txt] `) {
		t.Errorf("structuredContent was re-encoded:\n%s", out)
	}
}

// TestRewriteStructuredContentNothingWritten: when no blob is written (over the count limit,
// or passthrough), structuredContent keeps its strings.
func TestRewriteStructuredContentNothingWritten(t *testing.T) {
	m, _ := newTestMaterializer(t, false)
	data := []byte("x")
	items := make([]string, MaxBlobsPerResult+1)
	for i := range items {
		items[i] = resourceItem("f.bin", "", data)
	}
	b64 := base64.StdEncoding.EncodeToString(data)
	in := `{"content":[` + strings.Join(items, ",") + `],"structuredContent":{"s":"` + b64 + `"}}`
	out, _, err := m.Rewrite("a", json.RawMessage(in), false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(out), `"structuredContent":{"s":"`+b64+`"}}`) {
		t.Errorf("structuredContent changed although nothing was written: %s", out[len(out)-80:])
	}
}
