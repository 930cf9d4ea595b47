package blobs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRewriteFileURIEscaping(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "my blobs#1")
	m, err := New(Options{Dir: parent})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := m.Rewrite("a", resultOf(resourceItem("x.txt", "text/plain", []byte("hi"))), true)
	if err != nil {
		t.Fatal(err)
	}
	items := contentOf(t, out)
	uri := items[1]["uri"].(string)
	wantPath := filepath.Join(parent, "a", shaName([]byte("hi"), "txt"))
	if !strings.HasPrefix(uri, "file:///") || !strings.Contains(uri, "my%20blobs%231") {
		t.Fatalf("uri %q is not an escaped file URI", uri)
	}
	if items[0]["text"] != "[Document: x.txt] "+wantPath {
		t.Fatalf("text %q", items[0]["text"])
	}
}

func TestRewriteNames(t *testing.T) {
	for _, tc := range []struct {
		uri, name, ext string
	}{
		{"file:///srv/a/../../etc/passwd", "passwd", ""},
		{"file:///srv/..", "__", ""},
		{"file:///srv/x/..%2F..%2Fetc%2Fshadow.txt", "______etc_shadow.txt", "txt"},
		{"file:///srv/a%2Fb%5Cc.md", "a_b_c.md", "md"},
		{"file:///srv/nul%00byte.png", "nul_byte.png", "png"},
		{"file:///srv/ctl%01%1F%7F%C2%85.csv", "ctl____.csv", "csv"},
		{"file:///srv/bidi%E2%80%AEfdp.exe", "bidi_fdp.exe", "exe"},
		{"file:///srv/tag%F3%A0%80%81x.txt", "tagx.txt", "txt"},
		{"file:///srv/bad%FFutf8.txt", "bad_utf8.txt", "txt"},
		{"file:///srv/line\u2028sep.txt", "line_sep.txt", "txt"},
		{"name..tar...GZ", "name__tar___GZ", ""},
		{"archive.tar.GZ", "archive.tar.GZ", "gz"},
		{"file:///srv/dir/", "upload.bin", "bin"},
		{"", "upload.bin", "bin"},
		{"urn:isbn:0451450523", "upload.bin", "bin"},
		{"https://h/p/report.pdf?token=abc#frag", "report.pdf", "pdf"},
		{"https://h/p/noext", "noext", ""},
		{"https://h/p/x.toolongextension1234", "x.toolongextension1234", ""},
		{"https://h/p/x.abcdefghijklmnop", "x.abcdefghijklmnop", "abcdefghijklmnop"},
		{"https://h/p/x.ta-r", "x.ta-r", ""},
		{"https://h/p/%20%20spaced.txt%20", "spaced.txt", "txt"},
		{"https://h/p/.", "upload.bin", "bin"},
		{"bad uri \x01 with/ctl.txt", "ctl.txt", "txt"},
		{"https://h/p/" + strings.Repeat("é", 100) + ".jpeg", strings.Repeat("é", 61) + ".jpeg", "jpeg"},
	} {
		t.Run(tc.uri, func(t *testing.T) {
			m, dir := newTestMaterializer(t, false)
			data := []byte("content of " + tc.uri)
			in := resultOf(`{"type":"resource","resource":{"uri":` + jstr(tc.uri) + `,"blob":` + jstr(base64.StdEncoding.EncodeToString(data)) + `}}`)
			out, rep, err := m.Rewrite("a", in, true)
			if err != nil {
				t.Fatal(err)
			}
			ext := tc.ext
			if tc.name == "upload.bin" {
				ext = "bin"
			}
			path := filepath.Join(dir, "a", shaName(data, ext))
			if rep.Blobs[0].Path != path {
				t.Fatalf("path %q, want %q (%+v)", rep.Blobs[0].Path, path, rep.Blobs[0])
			}
			items := contentOf(t, out)
			if items[1]["name"] != tc.name {
				t.Fatalf("name %q, want %q", items[1]["name"], tc.name)
			}
			text := items[0]["text"].(string)
			if text != "[Document: "+tc.name+"] "+path && text != "[IMAGE:"+path+"]" {
				t.Fatalf("text %q", text)
			}
			if tree := treeOf(t, dir); !reflect.DeepEqual(tree, []string{"a", "a/" + filepath.Base(path)}) {
				t.Fatalf("tree %v", tree)
			}
		})
	}
}

func TestRewriteSymlinks(t *testing.T) {
	data := []byte("secret payload")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir, outside string)
	}{
		{"blobs dir is a symlink", func(t *testing.T, dir, outside string) {
			mustSymlink(t, outside, dir)
		}},
		{"blobs dir is a dangling symlink", func(t *testing.T, dir, outside string) {
			mustSymlink(t, filepath.Join(outside, "missing"), dir)
		}},
		{"agent dir is a symlink", func(t *testing.T, dir, outside string) {
			mustMkdir(t, dir)
			mustSymlink(t, outside, filepath.Join(dir, "a"))
		}},
		{"agent dir is a relative symlink inside the blobs dir", func(t *testing.T, dir, outside string) {
			mustMkdir(t, filepath.Join(dir, "other"))
			mustSymlink(t, "other", filepath.Join(dir, "a"))
		}},
		{"target file is a symlink", func(t *testing.T, dir, outside string) {
			mustMkdir(t, filepath.Join(dir, "a"))
			mustSymlink(t, filepath.Join(outside, "victim"), filepath.Join(dir, "a", shaName(data, "txt")))
		}},
		{"target file is a symlink to an existing file", func(t *testing.T, dir, outside string) {
			mustMkdir(t, filepath.Join(dir, "a"))
			victim := filepath.Join(outside, "victim")
			if err := os.WriteFile(victim, bytes.Repeat([]byte{'x'}, len(data)), 0o600); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, victim, filepath.Join(dir, "a", shaName(data, "txt")))
		}},
		{"agent dir is a file", func(t *testing.T, dir, outside string) {
			mustMkdir(t, dir)
			if err := os.WriteFile(filepath.Join(dir, "a"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"target is a directory", func(t *testing.T, dir, outside string) {
			mustMkdir(t, filepath.Join(dir, "a", shaName(data, "txt")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "blobs")
			outside := filepath.Join(parent, "outside")
			mustMkdir(t, outside)
			tc.setup(t, dir, outside)
			before := treeOf(t, parent)
			victimBefore, _ := os.ReadFile(filepath.Join(outside, "victim"))

			m, err := New(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			out, rep, err := m.Rewrite("a", resultOf(resourceItem("f.txt", "", data), resourceItem("g.txt", "", []byte("other"))), true)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Blobs[0].Result != ResultUnavailable {
				t.Fatalf("outcome %+v, want unavailable", rep.Blobs[0])
			}
			if texts := textsOf(t, out); texts[0] != "[attachment unavailable: the file could not be stored]" {
				t.Fatalf("texts %q", texts)
			}
			if strings.Contains(string(out), "resource_link") && rep.Blobs[1].Result == ResultUnavailable {
				t.Fatalf("resource_link for an unavailable blob: %s", out)
			}
			after := treeOf(t, parent)
			// The only change allowed is the second, unrelated blob landing inside a real agent dir.
			for _, p := range after {
				if !contains(before, p) && !strings.HasPrefix(p, "blobs/a/") && !strings.HasPrefix(p, "blobs/other/") {
					t.Fatalf("new path %q (before %v, after %v)", p, before, after)
				}
			}
			if got, _ := os.ReadFile(filepath.Join(outside, "victim")); !bytes.Equal(got, victimBefore) {
				t.Fatalf("file outside the blobs dir changed: %q", got)
			}
			if entries, _ := os.ReadDir(outside); len(entries) > 1 {
				t.Fatalf("outside dir holds %v", entries)
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestRewriteSameContentTwice(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	data := []byte("same bytes")
	in := resultOf(resourceItem("one.txt", "", data), resourceItem("two.txt", "", data))
	_, rep, err := m.Rewrite("a", in, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(results(rep), []string{ResultWritten, ResultReused}) {
		t.Fatalf("results %v", results(rep))
	}
	_, rep, err = m.Rewrite("a", resultOf(resourceItem("three.txt", "", data)), false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(results(rep), []string{ResultReused}) {
		t.Fatalf("results %v", results(rep))
	}
	if tree := treeOf(t, dir); !reflect.DeepEqual(tree, []string{"a", "a/" + shaName(data, "txt")}) {
		t.Fatalf("tree %v", tree)
	}
}

func TestRewriteReplacesTornFile(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	data := []byte("the full content")
	path := filepath.Join(dir, "a", shaName(data, "txt"))
	mustMkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, data[:4], 0o600); err != nil {
		t.Fatal(err)
	}
	_, rep, err := m.Rewrite("a", resultOf(resourceItem("x.txt", "", data)), false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Blobs[0].Result != ResultWritten {
		t.Fatalf("result %v", rep.Blobs[0])
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatalf("file = %q", got)
	}
}

func TestRewriteConcurrent(t *testing.T) {
	m, dir := newTestMaterializer(t, false)
	data := bytes.Repeat([]byte("concurrent "), 1000)
	in := resultOf(resourceItem("c.txt", "", data))
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, rep, err := m.Rewrite("a", in, false)
			if err == nil && rep.Blobs[0].Result != ResultWritten && rep.Blobs[0].Result != ResultReused {
				err = fmt.Errorf("outcome %+v", rep.Blobs[0])
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if tree := treeOf(t, dir); !reflect.DeepEqual(tree, []string{"a", "a/" + shaName(data, "txt")}) {
		t.Fatalf("tree %v", tree)
	}
}
