package blobs

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"testing"
)

// quoted is raw between quotes: the literal whose body raw is.
func quoted(raw []byte) []byte { return append(append([]byte{'"'}, raw...), '"') }

func TestBlobReader(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{"", "", true},
		{"QQ==", "A", true},
		{"QUI=", "AB", true},
		{"QUJD", "ABC", true},
		{`QU\/D`, "AO\xc3", true}, // "QU/D" with the '/' escaped
		{"QUJD\r\nREVG\n", "ABCDEF", true},
		{"QQ=\n=", "A", true},
		{"QQ", "", false},
		{"QQ=", "", false},
		{"QQ===", "", false},
		{"QQ==QQ==", "", false},
		{"QQ==\nQQ==", "", false},
		{"QUJD====", "", false},
		{"QU JD", "", false},
		{"QUJD-_", "", false},
		{`\u0051\u0051\u003d\u003d`, "A", true},
	} {
		got, err := io.ReadAll(newBlobReader(quoted([]byte(tc.raw))))
		if tc.ok != (err == nil) || tc.ok && string(got) != tc.want {
			t.Errorf("%q: got %q, %v; want %q ok=%v", tc.raw, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidBase64) {
			t.Errorf("%q: error %v does not wrap ErrInvalidBase64", tc.raw, err)
		}
	}
	// Padding in the middle must fail wherever the decoder's chunks happen to end.
	long := bytes.Repeat([]byte("QUJD"), 255) // 1020 bytes: the next quantum straddles 1024
	for _, tail := range []string{"QQ==QUJD", "QUI=QUJD", "QQ==\r\nQQ=="} {
		raw := append(append([]byte{}, long...), tail...)
		if _, err := io.ReadAll(newBlobReader(quoted(raw))); !errors.Is(err, ErrInvalidBase64) {
			t.Errorf("...%s: err %v, want ErrInvalidBase64", tail, err)
		}
		if _, err := base64.StdEncoding.DecodeString(string(raw)); err == nil {
			t.Errorf("...%s: DecodeString accepts it; the test is wrong", tail)
		}
	}
}
