package blobs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRewriteOneBlob(t *testing.T) {
	data := []byte("%PDF-1.7 not really a pdf \x00\x01\xff")
	for _, tc := range []struct {
		name string
		link bool
	}{
		{"with resource_link", true},
		{"without resource_link", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, dir := newTestMaterializer(t, false)
			in := resultOf(`{"type":"text","text":"before"}`, resourceItem("file:///srv/docs/Report.PDF", "application/pdf", data))
			out, rep, err := m.Rewrite("alice", in, tc.link)
			if err != nil {
				t.Fatalf("Rewrite: %v", err)
			}
			path := filepath.Join(dir, "alice", shaName(data, "pdf"))
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read materialized file: %v", err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("file bytes = %q, want %q", got, data)
			}
			want := `{"content":[{"type":"text","text":"before"},{"type":"text","text":` + jstr("[Document: Report.PDF] "+path) + `}`
			if tc.link {
				want += `,{"type":"resource_link","uri":` + jstr("file://"+path) + `,"name":"Report.PDF","mimeType":"application/pdf","size":` + fmt.Sprint(len(data)) + `}`
			}
			want += `]}`
			if string(out) != want {
				t.Fatalf("output:\n got %s\nwant %s", out, want)
			}
			wantRep := Report{Blobs: []Outcome{{Result: ResultWritten, Bytes: int64(len(data)), Path: path}}}
			if !reflect.DeepEqual(rep, wantRep) {
				t.Fatalf("report = %+v, want %+v", rep, wantRep)
			}
			for p, perm := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700, dir: 0o700} {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != perm {
					t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), perm)
				}
			}
			if tree := treeOf(t, dir); !reflect.DeepEqual(tree, []string{"alice", "alice/" + shaName(data, "pdf")}) {
				t.Fatalf("blob dir holds %v (temporary file left behind?)", tree)
			}
		})
	}
}

func TestRewriteImageText(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	data := []byte("\x89PNG fake")
	// No mimeType: the type comes from the extension.
	out, _, err := m.Rewrite("a", resultOf(resourceItem("https://example.com/img/chart.png?sig=secret", "", data)), true)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a", shaName(data, "png"))
	want := `{"content":[{"type":"text","text":` + jstr("[IMAGE:"+path+"]") + `},{"type":"resource_link","uri":` + jstr("file://"+path) + `,"name":"chart.png","mimeType":"image/png","size":9}]}`
	if string(out) != want {
		t.Fatalf("output:\n got %s\nwant %s", out, want)
	}
}

func TestRewriteBlobCountLimit(t *testing.T) {
	for _, n := range []int{64, 65} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, dir := newTestMaterializer(t, false)
			items := make([]string, n)
			for i := range items {
				items[i] = resourceItem(fmt.Sprintf("file:///f%d.txt", i), "text/plain", []byte(fmt.Sprintf("blob %d", i)))
			}
			out, rep, err := m.Rewrite("a", resultOf(items...), false)
			if err != nil {
				t.Fatal(err)
			}
			texts := textsOf(t, out)
			if len(texts) != n {
				t.Fatalf("%d text items, want %d", len(texts), n)
			}
			if n == 64 {
				if !reflect.DeepEqual(results(rep), repeat(ResultWritten, 64)) {
					t.Fatalf("results %v", results(rep))
				}
				if files := treeOf(t, filepath.Join(dir, "a")); len(files) != 64 {
					t.Fatalf("%d files written, want 64", len(files))
				}
				return
			}
			if !reflect.DeepEqual(results(rep), repeat(ResultOverBudget, 65)) {
				t.Fatalf("results %v", results(rep))
			}
			if !reflect.DeepEqual(texts, repeat("[attachment unavailable: 65 attachments in one result, over the limit of 64]", 65)) {
				t.Fatalf("texts %q", texts[0])
			}
			if !errors.Is(rep.Blobs[0].Err, ErrTooManyBlobs) {
				t.Fatalf("err %v", rep.Blobs[0].Err)
			}
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Fatalf("blob dir was created: %v", err)
			}
		})
	}
}

func TestRewriteTotalBudget(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	// 10 MiB + 1 decoded bytes in total, each blob well under the per-blob limit.
	a := bytes.Repeat([]byte{'a'}, 5<<20)
	b := bytes.Repeat([]byte{'b'}, 5<<20+1)
	in := resultOf(resourceItem("a.bin", "", a), `{"type":"text","text":"keep"}`, resourceItem("b.bin", "", b))
	out, rep, err := m.Rewrite("a", in, true)
	if err != nil {
		t.Fatal(err)
	}
	reason := "[attachment unavailable: attachments total about 10485761 bytes, over the limit of 10485760 bytes per result]"
	want := `{"content":[{"type":"text","text":"` + reason + `"},{"type":"text","text":"keep"},{"type":"text","text":"` + reason + `"}]}`
	if string(out) != want {
		t.Fatalf("output %s", out)
	}
	wantRep := []Outcome{{Result: ResultOverBudget, Bytes: 5 << 20}, {Result: ResultOverBudget, Bytes: 5<<20 + 1}}
	for i, o := range rep.Blobs {
		if o.Result != wantRep[i].Result || o.Bytes != wantRep[i].Bytes || !errors.Is(o.Err, ErrOverBudget) {
			t.Fatalf("outcome %d = %+v", i, o)
		}
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("blob dir was created: %v", err)
	}
}

func TestRewriteExactlyMaxBlob(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	data := bytes.Repeat([]byte{0xAB, 0xCD, 0x01}, (10<<20)/3+1)[:10<<20]
	out, rep, err := m.Rewrite("a", resultOf(resourceItem("big.dat", "", data)), false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(results(rep), []string{ResultWritten}) || rep.Blobs[0].Bytes != 10<<20 {
		t.Fatalf("report %+v", rep)
	}
	path := filepath.Join(dir, "a", shaName(data, "dat"))
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file differs (err %v, %d bytes)", err, len(got))
	}
	if texts := textsOf(t, out); !reflect.DeepEqual(texts, []string{"[Document: big.dat] " + path}) {
		t.Fatalf("texts %q", texts)
	}
}

func TestRewriteInvalidAmongValid(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	one, two := []byte("first"), []byte("second")
	bad := []string{
		`{"type":"resource","resource":{"uri":"bad.txt","blob":"not base64!"}}`,
		`{"type":"resource","resource":{"uri":"short.txt","blob":"QUJD"}}`, // valid: control
		`{"type":"resource","resource":{"uri":"trunc.txt","blob":"QUJ"}}`,
		`{"type":"resource","resource":{"uri":"mid-pad.txt","blob":"QQ==QQ=="}}`,
		`{"type":"resource","resource":{"uri":"space.txt","blob":"QU JD"}}`,
	}
	in := resultOf(resourceItem("one.txt", "", one), bad[0], bad[1], bad[2], bad[3], bad[4], resourceItem("two.txt", "", two))
	out, rep, err := m.Rewrite("a", in, false)
	if err != nil {
		t.Fatal(err)
	}
	wantResults := []string{ResultWritten, ResultInvalid, ResultWritten, ResultInvalid, ResultInvalid, ResultInvalid, ResultWritten}
	if !reflect.DeepEqual(results(rep), wantResults) {
		t.Fatalf("results %v, want %v", results(rep), wantResults)
	}
	for _, o := range rep.Blobs {
		if o.Result == ResultInvalid && !errors.Is(o.Err, ErrInvalidBase64) {
			t.Fatalf("invalid outcome without ErrInvalidBase64: %v", o.Err)
		}
	}
	agentDir := filepath.Join(dir, "a")
	wantTexts := []string{
		"[Document: one.txt] " + filepath.Join(agentDir, shaName(one, "txt")),
		"[attachment unavailable: invalid base64 data]",
		"[Document: short.txt] " + filepath.Join(agentDir, shaName([]byte("ABC"), "txt")),
		"[attachment unavailable: invalid base64 data]",
		"[attachment unavailable: invalid base64 data]",
		"[attachment unavailable: invalid base64 data]",
		"[Document: two.txt] " + filepath.Join(agentDir, shaName(two, "txt")),
	}
	if got := textsOf(t, out); !reflect.DeepEqual(got, wantTexts) {
		t.Fatalf("texts\n got %q\nwant %q", got, wantTexts)
	}
	if tree := treeOf(t, agentDir); len(tree) != 3 {
		t.Fatalf("agent dir holds %v, want the 3 valid files only", tree)
	}
}

func TestRewriteEmptyBlob(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	out, rep, err := m.Rewrite("a", resultOf(`{"type":"resource","resource":{"uri":"file:///empty.txt","blob":"","mimeType":"text/plain"}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a", shaName(nil, "txt"))
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != 0 {
		t.Fatalf("empty file: %v %v", fi, err)
	}
	want := `{"content":[{"type":"text","text":` + jstr("[Document: empty.txt] "+path) + `},{"type":"resource_link","uri":` + jstr("file://"+path) + `,"name":"empty.txt","mimeType":"text/plain","size":0}]}`
	if string(out) != want {
		t.Fatalf("output:\n got %s\nwant %s", out, want)
	}
	if rep.Blobs[0].Result != ResultWritten || rep.Blobs[0].Bytes != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestRewriteJSONEscapes(t *testing.T) {
	data := []byte{0xfb, 0xff, 0xbf, 0xfe, 0x3f, 0x3e} // base64 "+/+/vv4/Pg==", full of '/'
	b64 := base64.StdEncoding.EncodeToString(data)
	escaped := strings.ReplaceAll(b64, "/", `\/`)
	escaped = strings.Replace(escaped, "+", `\u002b`, 1)
	escaped = strings.Replace(escaped, "=", `\u003D`, 1)
	for _, tc := range []struct{ name, item string }{
		{"escaped base64", `{"type":"resource","resource":{"uri":"x.bin","blob":"` + escaped + `"}}`},
		{"escaped keys and type", `{"t\u0079pe":"res\u006furce","\u0072esource":{"ur\u0069":"x.bin","bl\u006fb":"` + escaped + `"}}`},
		{"line-wrapped base64", `{"type":"resource","resource":{"uri":"x.bin","blob":"` + b64[:4] + `\r\n` + b64[4:] + `\n"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, dir := newTestMaterializer(t, false)
			_, rep, err := m.Rewrite("a", resultOf(tc.item), false)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Blobs[0].Result != ResultWritten {
				t.Fatalf("outcome %+v", rep.Blobs[0])
			}
			got, err := os.ReadFile(filepath.Join(dir, "a", shaName(data, "bin")))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("file %x, err %v", got, err)
			}
		})
	}
}

func TestRewriteMedia(t *testing.T) {
	img, aud := []byte("\x89PNG..."), []byte("ID3 mp3")
	for _, tc := range []struct {
		name, item string
		data       []byte
		text, file string
		link       string
	}{
		{"png", mediaItem("image", "image/png", img), img, "[IMAGE:%s]", shaName(img, "png"), `"name":"image.png","mimeType":"image/png"`},
		{"jpeg", mediaItem("image", "image/JPEG", img), img, "[IMAGE:%s]", shaName(img, "jpg"), `"name":"image.jpg","mimeType":"image/jpeg"`},
		{"svg", mediaItem("image", "image/svg+xml", img), img, "[IMAGE:%s]", shaName(img, "svg"), `"name":"image.svg","mimeType":"image/svg+xml"`},
		{"unknown image", mediaItem("image", "image/x-thing", img), img, "[IMAGE:%s]", shaName(img, "bin"), `"name":"image.bin","mimeType":"image/x-thing"`},
		{"mp3", mediaItem("audio", "audio/mpeg", aud), aud, "[Document: audio.mp3] %s", shaName(aud, "mp3"), `"name":"audio.mp3","mimeType":"audio/mpeg"`},
		{"wav", mediaItem("audio", "audio/x-wav", aud), aud, "[Document: audio.wav] %s", shaName(aud, "wav"), `"name":"audio.wav","mimeType":"audio/x-wav"`},
		{"flac", mediaItem("audio", "audio/flac", aud), aud, "[Document: audio.flac] %s", shaName(aud, "flac"), `"name":"audio.flac","mimeType":"audio/flac"`},
		{"ogg with params", mediaItem("audio", "audio/ogg; codecs=opus", aud), aud, "[Document: audio.ogg] %s", shaName(aud, "ogg"), `"name":"audio.ogg","mimeType":"audio/ogg; codecs=opus"`},
		{"no mimeType", `{"type":"audio","data":"` + base64.StdEncoding.EncodeToString(aud) + `"}`, aud, "[Document: audio.bin] %s", shaName(aud, "bin"), `"name":"audio.bin","mimeType":"application/octet-stream"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, dir := newTestMaterializer(t, true)
			out, rep, err := m.Rewrite("a", resultOf(tc.item), true)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "a", tc.file)
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("file %s: %q %v (report %+v)", path, got, err, rep)
			}
			want := `{"content":[{"type":"text","text":` + jstr(fmt.Sprintf(tc.text, path)) + `},{"type":"resource_link","uri":` + jstr("file://"+path) + `,` + tc.link + `,"size":` + fmt.Sprint(len(tc.data)) + `}]}`
			if string(out) != want {
				t.Fatalf("output:\n got %s\nwant %s", out, want)
			}

			// Without MaterializeMedia the item is not touched.
			plain, _ := newTestMaterializer(t, false)
			in := resultOf(tc.item)
			out, rep, err = plain.Rewrite("a", in, true)
			if err != nil || !bytes.Equal(out, in) || len(rep.Blobs) != 0 {
				t.Fatalf("without media: %s %+v %v", out, rep, err)
			}
		})
	}
}

func TestRewritePassthrough(t *testing.T) {
	m, err := New(Options{Mode: ModePassthrough})
	if err != nil {
		t.Fatal(err)
	}
	in := resultOf(resourceItem("x.bin", "", []byte("data")))
	// The agent name is not even looked at in passthrough mode.
	out, rep, err := m.Rewrite("not a valid agent!", in, true)
	if err != nil || len(rep.Blobs) != 0 || &out[0] != &in[0] || len(out) != len(in) {
		t.Fatalf("passthrough changed the result: %s %+v %v", out, rep, err)
	}
}

func TestRewriteByteExact(t *testing.T) {
	m, dir := newTestMaterializer(t, true)
	data := []byte("blob")
	prefix := "{ \"isError\" : false,\n  \"_meta\": {\"big\": 123456789012345678901234567890, \"k\":[1,2.50e+3,{\"blob\":\"QQ==\"}]},\n" +
		"  \"content\" : [ {\"type\":\"text\",\"text\":\"caf\\u00e9 \\\"q\\\"\",\"annotations\":{\"priority\":0.5}} ,\n\t"
	blob := resourceItem("file:///x.bin", "application/octet-stream", data)
	middle := " ,{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///t.txt\",\"text\":\"embedded text\"}}, " +
		"{\"type\":\"resource_link\",\"uri\":\"file:///y\",\"name\":\"y\"},{\"type\":\"x-future\",\"blob\":\"QQ==\"}," +
		"{\"type\":\"resource\",\"resource\":{\"blob\":null}} , {\"type\":\"image\",\"data\":42}, 7, \"str\", [ ] ,"
	image := mediaItem("image", "image/webp", data)
	suffix := " ],\n  \"structuredContent\": {\"resource\":{\"blob\":\"QQ==\"},\"n\":1e400}, \"futureTop\": [true,null]\n} \n"
	in := json.RawMessage(prefix + blob + middle + image + suffix)
	out, rep, err := m.Rewrite("a", in, false)
	if err != nil {
		t.Fatal(err)
	}
	docPath := filepath.Join(dir, "a", shaName(data, "bin"))
	imgPath := filepath.Join(dir, "a", shaName(data, "webp"))
	want := prefix + `{"type":"text","text":` + jstr("[Document: x.bin] "+docPath) + `}` + middle +
		`{"type":"text","text":` + jstr("[IMAGE:"+imgPath+"]") + `}` + suffix
	if string(out) != want {
		t.Fatalf("output:\n got %s\nwant %s", out, want)
	}
	if !reflect.DeepEqual(results(rep), []string{ResultWritten, ResultWritten}) {
		t.Fatalf("results %v", results(rep))
	}
}

func TestRewriteDuplicateKeys(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	first, second := []byte("first"), []byte("second")
	in := json.RawMessage(`{"content":[` + resourceItem("a.txt", "", first) + `],"content":[` + resourceItem("b.txt", "", second) + `],` +
		`"\u0063ontent":[{"type":"text","type":"resource","resource":{"blob":"QQ==","blob":"` + base64.StdEncoding.EncodeToString(second) + `","uri":"c.txt"}}]}`)
	out, rep, err := m.Rewrite("a", in, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(results(rep), []string{ResultWritten, ResultWritten, ResultReused}) {
		t.Fatalf("results %v", results(rep))
	}
	if bytes.Contains(out, []byte(base64.StdEncoding.EncodeToString(second))) {
		t.Fatalf("a blob survived: %s", out)
	}
	if tree := treeOf(t, filepath.Join(dir, "a")); len(tree) != 2 {
		t.Fatalf("tree %v", tree)
	}
}

func TestRewriteNothingToDo(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	for _, in := range []string{
		`{"content":[{"type":"text","text":"hello"}],"structuredContent":{"a":1}}`,
		`{"content":[]}`,
		`{}`,
		`{"content":"not an array"}`,
		`{"Content":[{"type":"resource","resource":{"blob":"QQ=="}}]}`,
		`[{"type":"resource","resource":{"blob":"QQ=="}}]`,
		`null`,
		` "string" `,
		`{"content":[{"type":"resource","resource":{"uri":"x","text":"no blob"}}]}`,
		`{"content":[{"type":"resource","resource":"not an object"}]}`,
		`{"content":[{"type":"resource","resource":{"blob":{"nested":"QQ=="}}}]}`,
		`{"content":[{"type":"image","data":"QQ==","mimeType":"image/png"}]}`,
		// Not JSON, but without blob items: returned as it came.
		`{"content":[{"type":"text","text":"unterminated}]`,
		`{"content":[{"type":"resource","resource":{"blob":`,
		`{"content":`,
		`{`,
		`}`,
		``,
	} {
		raw := json.RawMessage(in)
		out, rep, err := m.Rewrite("a", raw, true)
		if err != nil || len(rep.Blobs) != 0 || len(out) != len(raw) || len(raw) > 0 && &out[0] != &raw[0] {
			t.Fatalf("%s: got %s %+v %v, want the input itself", in, out, rep, err)
		}
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("blob dir created with nothing to write: %v", err)
	}
}

func TestRewriteNothingToDoAllocs(t *testing.T) {
	m, _ := newTestMaterializer(t, false)
	in := json.RawMessage(`{"content":[{"type":"text","text":"hello"},{"type":"resource","resource":{"uri":"x","text":"t"}}],"_meta":{"k":[1,2,3]}}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := m.Rewrite("a", in, true); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("%v allocations on a result without blobs, want 0", allocs)
	}
}

func TestRewriteErrors(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	blob := resultOf(resourceItem("x.bin", "", []byte("x")))
	for _, tc := range []struct {
		name, agent string
		in          json.RawMessage
		want        error
	}{
		{"empty agent", "", blob, ErrInvalidAgent},
		{"agent with slash", "../x", blob, ErrInvalidAgent},
		{"agent with dot", "a.b", blob, ErrInvalidAgent},
		{"agent too long", strings.Repeat("a", 33), blob, ErrInvalidAgent},
		{"truncated JSON", "a", blob[:len(blob)-1], ErrMalformedResult},
		{"trailing garbage", "a", json.RawMessage(string(blob) + "x"), ErrMalformedResult},
		{"unterminated blob", "a", json.RawMessage(`{"content":[{"type":"resource","resource":{"blob":"QQ==`), ErrMalformedResult},
		{"bad escape in a blob", "a", json.RawMessage(`{"content":[{"type":"resource","resource":{"blob":"QQ\x=="}}]}`), ErrMalformedResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := m.Rewrite(tc.agent, tc.in, false)
			if !errors.Is(err, tc.want) || out != nil {
				t.Fatalf("got %s, %v; want error %v", out, err, tc.want)
			}
		})
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("something was written: %v", err)
	}
	if err := ValidateAgent(strings.Repeat("a", 32)); err != nil {
		t.Fatalf("32-character agent refused: %v", err)
	}
	if err := ValidateAgent("Agent_1-x"); err != nil {
		t.Fatalf("valid agent refused: %v", err)
	}
}

func TestNew(t *testing.T) {
	abs := t.TempDir()
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"default mode", Options{Dir: abs}, true},
		{"file mode", Options{Dir: abs, Mode: ModeFile}, true},
		{"passthrough without dir", Options{Mode: ModePassthrough}, true},
		{"unknown mode", Options{Dir: abs, Mode: "copy"}, false},
		{"no dir", Options{Mode: ModeFile}, false},
		{"relative dir", Options{Dir: "blobs"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.opts)
			if tc.ok != (err == nil) || tc.ok != (m != nil) {
				t.Fatalf("New(%+v) = %v, %v", tc.opts, m, err)
			}
			if err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("error %v does not wrap ErrInvalidOptions", err)
			}
		})
	}
	// New creates nothing.
	dir := filepath.Join(abs, "later", "blobs")
	if _, err := New(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Dir(dir)); !os.IsNotExist(err) {
		t.Fatalf("New created %s", dir)
	}
}

func TestRewritePerBlobLimit(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	m.limits.maxPerBlob = 10
	small, big := []byte("0123456789"), []byte("0123456789A")
	out, rep, err := m.Rewrite("a", resultOf(resourceItem("big.bin", "", big), resourceItem("small.bin", "", small)), false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(results(rep), []string{ResultTooLarge, ResultWritten}) || !errors.Is(rep.Blobs[0].Err, ErrTooLarge) {
		t.Fatalf("report %+v", rep)
	}
	want := []string{"[attachment unavailable: about 11 bytes, over the limit of 10 bytes per attachment]",
		"[Document: small.bin] " + filepath.Join(dir, "a", shaName(small, "bin"))}
	if got := textsOf(t, out); !reflect.DeepEqual(got, want) {
		t.Fatalf("texts %q", got)
	}
}
