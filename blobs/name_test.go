package blobs

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitizeName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"..", "__"},
		{"...", "___"},
		{"a..b", "a__b"},
		{"a.b.c", "a.b.c"},
		{".hidden", ".hidden"},
		{".", ""},
		{"  ", ""},
		{"a/b\\c", "a_b_c"},
		{"nul\x00", "nul_"},
		{"tab\tnew\nline\r", "tab_new_line_"},
		{"del\x7f", "del_"},
		{"c1\u0085", "c1_"},
		{"rtl\u202egnp.exe", "rtl_gnp.exe"},
		{"zw\u200bj", "zw_j"},
		{"tag\U000E0041\U000E007F", "tag"},
		{"a.\U000E0041.b", "a__b"},
		{".\U000E0041.", "__"},
		{"ls\u2028ps\u2029", "ls_ps_"},
		{"bad\xffutf8", "bad_utf8"},
		{"café 日本.txt", "café 日本.txt"},
		{" padded.txt ", "padded.txt"},
	} {
		if got := sanitizeName(tc.in); got != tc.want {
			t.Errorf("sanitizeName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTruncateName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{strings.Repeat("a", 200) + ".pdf", strings.Repeat("a", 124) + ".pdf"},
		{strings.Repeat("a", 200), strings.Repeat("a", 128)},
		{strings.Repeat("日", 100) + ".png", strings.Repeat("日", 41) + ".png"},
		{strings.Repeat("a", 123) + ".b.pdf", strings.Repeat("a", 123) + ".pdf"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
	} {
		got := truncateName(tc.in)
		if got != tc.want {
			t.Errorf("truncateName(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
		}
		if len(got) > maxNameBytes || !utf8.ValidString(got) || strings.Contains(got, "..") {
			t.Errorf("truncateName(%q) = %q: too long, invalid or with ..", tc.in, got)
		}
	}
	// A long name is cut while copying, and the result is still bounded.
	if got := sanitizeName(strings.Repeat("x", 1<<20) + ".txt"); len(got) != maxNameBytes {
		t.Errorf("a 1 MiB name became %d bytes", len(got))
	}
}

func TestLastSegment(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"file:///a/b/c.txt", "c.txt"},
		{"https://h/a/b%20c.txt?x=1#f", "b c.txt"},
		{"https://h/a/b%2Fc.txt", "b/c.txt"},
		{"https://h", ""},
		{"https://h/", ""},
		{"relative/name.md", "name.md"},
		{"name.md", "name.md"},
		{"mailto:x@y", ""},
		{"http://h/%zz/bad%zz.txt?q", "bad%zz.txt"},
		{"x\x01y/z.txt?q=1", "z.txt"},
	} {
		if got := lastSegment(tc.in); got != tc.want {
			t.Errorf("lastSegment(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestExtOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a.PDF", "pdf"},
		{"a.tar.gz", "gz"},
		{"a", ""},
		{"a.", ""},
		{"a.b-c", ""},
		{"a.ñ", ""},
		{"a.1234567890abcdef", "1234567890abcdef"},
		{"a.1234567890abcdefg", ""},
		{".env", "env"},
	} {
		if got := extOf(tc.in); got != tc.want {
			t.Errorf("extOf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMIME(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"image/PNG", "image/png"},
		{" application/pdf ", "application/pdf"},
		{"text/plain; charset=UTF-8", "text/plain; charset=UTF-8"},
		{"not a type", ""},
		{"text", ""},
		{"", ""},
		{"image/png\r\nX-Injected: 1", ""},
		{"a/" + strings.Repeat("b", 300), ""},
	} {
		if got := cleanMIME(tc.in); got != tc.want {
			t.Errorf("cleanMIME(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for ext, want := range map[string]string{"png": "image/png", "pdf": "application/pdf", "": octetStream, "zzqqxx": octetStream, "jpeg": "image/jpeg"} {
		if got := mimeFromExt(ext); got != want {
			t.Errorf("mimeFromExt(%q) = %q, want %q", ext, got, want)
		}
	}
	for mt, want := range map[string]string{
		"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp", "image/svg+xml": "svg",
		"audio/wav": "wav", "audio/mpeg": "mp3", "audio/ogg; codecs=opus": "ogg", "audio/flac": "flac",
		"image/tiff": "bin", "audio/aac": "bin", "": "bin",
	} {
		if got := mediaExt(mt); got != want {
			t.Errorf("mediaExt(%q) = %q, want %q", mt, got, want)
		}
	}
}
