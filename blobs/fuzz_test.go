package blobs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// storedName is what may exist under <Dir>/<agent>: content-named files only.
var storedName = regexp.MustCompile(`^a/[0-9a-f]{64}(\.[0-9a-z]{1,16})?$`)

func FuzzRewrite(f *testing.F) {
	for _, seed := range []string{
		string(resultOf(resourceItem("file:///x/report.pdf", "application/pdf", []byte("pdf bytes")))),
		string(resultOf(resourceItem("../../etc/passwd", "", []byte("x")), `{"type":"text","text":"t"}`)),
		string(resultOf(mediaItem("image", "image/png", []byte("png")), mediaItem("audio", "audio/wav", []byte("wav")))),
		`{"content":[{"type":"resource","resource":{"blob":"QQ\/=","uri":"a\u0000b"}}],"_meta":{"x":1}}`,
		`{"content":[{"type":"resource","resource":{"blob":"!!!"}}],"structuredContent":{"blob":"QQ=="}}`,
		`{"content":[{"type":"resource","resource":{"blob":"QQ=="}}],"structuredContent":{"QQ==":"Q\u0051==","a":["QQ==",{"b":"QQ\u003d="}]}}`,
		`{"content":[{"type":"resource","resource":{"blob":""}},{"type":"resource","resource":{"blob":""}}]}`,
		`{"\u0063ontent":[{"t\u0079pe":"resource","resource":{"blob":"QUJD"}}],"content":[]}`,
		`{"content":[{"type":"resource","resource":{"blob":"QQ==`,
		`{"content":[{"type":"resource","resource":{"blob":"QQ==\"}}]}`,
		`[1,2,{"content":[]}]`,
		`{"content":[[[[[{"type":"resource"}]]]]]}`,
	} {
		f.Add([]byte(seed), true, true)
		f.Add([]byte(seed), false, false)
	}
	f.Fuzz(func(t *testing.T, in []byte, media, link bool) {
		checkRewrite(t, in, media, link)
		// The same bytes as the URI (names) and as the content of a well-formed blob item.
		// structuredContent holds the same base64, escaped differently.
		b64 := base64.StdEncoding.EncodeToString(in)
		item := `{"type":"resource","resource":{"uri":"` + string(escapeJSON(in, in)) + `","blob":"` + b64 + `"}}`
		withStructured := `{"content":[` + item + `],"structuredContent":{"k":["` + string(escapeJSON([]byte(b64), in)) + `"]}}`
		out, rep := checkRewrite(t, json.RawMessage(withStructured), media, true)
		if len(rep.Blobs) != 1 || rep.Blobs[0].Result != ResultWritten || rep.Blobs[0].Bytes != int64(len(in)) {
			t.Fatalf("well-formed blob of %q: %+v", in, rep)
		}
		content := contentOf(t, out)
		name, _ := content[1]["name"].(string)
		if name == "" || len(name) > maxNameBytes || !utf8.ValidString(name) || strings.ContainsAny(name, "/\\\x00") ||
			strings.Contains(name, "..") || strings.IndexFunc(name, unsafeRune) >= 0 {
			t.Fatalf("unsafe display name %q from %q", name, in)
		}
		if want := "[Document: " + name + "] " + rep.Blobs[0].Path; content[0]["text"] != want && !strings.HasPrefix(content[0]["text"].(string), "[IMAGE:") {
			t.Fatalf("text %q, want %q", content[0]["text"], want)
		}
		var res struct {
			Structured struct{ K []string } `json:"structuredContent"`
		}
		if err := json.Unmarshal(out, &res); err != nil || len(res.Structured.K) != 1 || res.Structured.K[0] != content[0]["text"] {
			t.Fatalf("structuredContent %+v (%v), want the text %q", res.Structured, err, content[0]["text"])
		}
	})
}

// checkRewrite runs Rewrite on in with a fresh Dir and checks what must hold for any input.
func checkRewrite(t *testing.T, in []byte, media, link bool) (json.RawMessage, Report) {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "blobs")
	m, err := New(Options{Dir: dir, MaterializeMedia: media})
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(in)
	out, rep, err := m.Rewrite("a", in, link)
	if !bytes.Equal(in, orig) {
		t.Fatalf("Rewrite modified its input")
	}
	valid := json.Valid(in)
	switch {
	case err != nil && valid:
		t.Fatalf("valid input failed: %v", err)
	case err != nil:
		// Invalid input with blob items: refused, nothing written.
	case len(rep.Blobs) == 0:
		if !bytes.Equal(out, in) {
			t.Fatalf("no blob items, but the output differs:\n in %q\nout %q", in, out)
		}
	case !json.Valid(out):
		t.Fatalf("valid input, invalid output:\n in %q\nout %q", in, out)
	}
	for _, o := range rep.Blobs {
		if o.Result != ResultWritten && o.Result != ResultReused {
			continue
		}
		fi, err := os.Lstat(o.Path)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != o.Bytes {
			t.Fatalf("outcome %+v: file %v %v", o, fi, err)
		}
		if !bytes.Contains(out, []byte(filepath.Base(o.Path))) {
			t.Fatalf("output does not name %s", o.Path)
		}
	}
	// Nothing outside <Dir>, and under it only the agent directory and content files.
	for _, p := range treeOf(t, parent) {
		if p != "blobs" && p != "blobs/a" && !storedName.MatchString(strings.TrimPrefix(p, "blobs/")) {
			t.Fatalf("unexpected path %q", p)
		}
	}
	return out, rep
}

// escapeJSON writes text as the body of a JSON string literal. Characters JSON requires to be
// escaped always are; other ASCII characters are escaped when the matching byte of mask says
// so, as \/ (for '/') or \u00XX. Bytes of 0x80 and above pass raw.
func escapeJSON(text, mask []byte) []byte {
	var out []byte
	for i, c := range text {
		m := byte(0)
		if len(mask) > 0 {
			m = mask[i%len(mask)]
		}
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			out = fmt.Appendf(out, `\u%04x`, c)
		case c < 0x80 && m%3 == 1:
			out = fmt.Appendf(out, `\u%04X`, c)
		case c == '/' && m%3 == 2:
			out = append(out, '\\', '/')
		default:
			out = append(out, c)
		}
	}
	return out
}

func FuzzEstimate(f *testing.F) {
	for _, s := range []string{"", "QQ==", "QUI=", "QUJD", "QQ=\n=", "QUJD\r\nREVG", "QQ==QQ==", "+/+/", "QQ", "====", "QUJD\n\n\n"} {
		f.Add([]byte(s), []byte{0, 1, 2})
	}
	f.Fuzz(func(t *testing.T, text, mask []byte) {
		est := estimateBase64(text)
		dec, err := base64.StdEncoding.DecodeString(string(text))
		if err == nil {
			if est < int64(len(dec)) {
				t.Fatalf("estimate %d below the decoded length %d of %q", est, len(dec), text)
			}
			if !bytes.ContainsAny(text, "\r\n") && est != int64(len(dec)) {
				t.Fatalf("estimate %d, decoded length %d of %q without line breaks", est, len(dec), text)
			}
		}
		raw := escapeJSON(text, mask)
		if got := estimateJSONString(quoted(raw)); got != est {
			t.Fatalf("estimate of the JSON form %q is %d, of the text %d", raw, got, est)
		}
		unescaped, uerr := io.ReadAll(rawjson.NewStringReader(quoted(raw)))
		if uerr != nil || !bytes.Equal(unescaped, text) {
			t.Fatalf("un-escaping %q gave %q, %v; want %q", raw, unescaped, uerr, text)
		}
		got, serr := io.ReadAll(newBlobReader(quoted(raw)))
		if (serr == nil) != (err == nil) {
			t.Fatalf("%q: streaming decode error %v, DecodeString error %v", text, serr, err)
		}
		if err == nil && !bytes.Equal(got, dec) {
			t.Fatalf("%q: streaming decode %x, DecodeString %x", text, got, dec)
		}
	})
}
