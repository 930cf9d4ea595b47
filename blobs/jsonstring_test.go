package blobs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestStringReader(t *testing.T) {
	for _, lit := range []string{
		`""`,
		`"plain"`,
		`"a\/b\\c\"d"`,
		`"\b\f\n\r\t"`,
		`"\u0041\u00e9\u65e5"`,
		`"\ud83d\ude00 pair"`,
		`"lone \ud83d high"`,
		`"lone \ude00 low"`,
		`"\ud83d\u0041 high then BMP"`,
		`"\ud83d\ud83d two highs"`,
		`"ends with \ud83d"`,
		`"raw é and 日"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		raw := []byte(lit[1 : len(lit)-1])
		got, err := io.ReadAll(newStringReader(raw))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q, %v; want %q", lit, got, err, want)
		}
		// One byte at a time exercises the pending buffer of multi-byte escapes.
		got, err = io.ReadAll(iotest.OneByteReader(newStringReader(raw)))
		if err != nil || string(got) != want {
			t.Errorf("%s one byte at a time: got %q, %v; want %q", lit, got, err, want)
		}
		if err := iotest.TestReader(newStringReader(raw), []byte(want)); err != nil {
			t.Errorf("%s: %v", lit, err)
		}
	}
}

func TestStringReaderMalformed(t *testing.T) {
	for _, raw := range []string{`\`, `\x`, `\u12`, `\u12G4`, `ok\`} {
		_, err := io.ReadAll(newStringReader([]byte(raw)))
		if !errors.Is(err, ErrMalformedResult) {
			t.Errorf("%q: err %v, want ErrMalformedResult", raw, err)
		}
	}
}

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
		got, err := io.ReadAll(newBlobReader([]byte(tc.raw)))
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
		if _, err := io.ReadAll(newBlobReader(raw)); !errors.Is(err, ErrInvalidBase64) {
			t.Errorf("...%s: err %v, want ErrInvalidBase64", tail, err)
		}
		if _, err := base64.StdEncoding.DecodeString(string(raw)); err == nil {
			t.Errorf("...%s: DecodeString accepts it; the test is wrong", tail)
		}
	}
}
