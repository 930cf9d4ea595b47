package blobs

import (
	"encoding/base64"
	"testing"
)

func TestEstimate(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int64
	}{
		{"", 0},
		{"QQ==", 1},
		{"QUI=", 2},
		{"QUJD", 3},
		{"QUJDRA==", 4},
		{"QQ==\n", 1},
		{"QQ=\r\n=", 1},
		{"QUJD\nREVG", 6}, // 9 characters: over-estimated, never under
		{"==", 0},
		{"=", 0},
		{"QQ===", 1}, // invalid; padding counts at most 2
		{"Q", 0},
		{"QUJ", 0},
	} {
		if got := estimateBase64([]byte(tc.text)); got != tc.want {
			t.Errorf("estimateBase64(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestEstimateChunks(t *testing.T) {
	// Padding split across chunks, with line breaks in between, counts once.
	for _, chunks := range [][]string{
		{"QUJD", "RA", "==", ""},
		{"QUJDRA=", "\n", "="},
		{"QUJDRA==", "\r\n"},
		{"QUJDR", "A", "=", "="},
	} {
		var e sizeEstimate
		text := ""
		for _, c := range chunks {
			e.add([]byte(c))
			text += c
		}
		if got, want := e.decoded(), estimateBase64([]byte(text)); got != want {
			t.Errorf("%q in chunks: %d, whole: %d", chunks, got, want)
		}
	}
}

func TestEstimateJSONString(t *testing.T) {
	data := []byte{0xfb, 0xff, 0xbf, 0x01}
	b64 := base64.StdEncoding.EncodeToString(data) // "+/+/AQ=="
	for _, raw := range []string{
		b64,
		`+\/+\/AQ==`,
		`\u002b\/+/AQ\u003d\u003D`,
		`+/+/AQ=\n=`,
	} {
		got := estimateJSONString(quoted([]byte(raw)))
		want := int64(len(data))
		if raw == `+/+/AQ=\n=` {
			want = 4 // 9 characters after un-escaping: 9/4*3 - 2
		}
		if got != want {
			t.Errorf("estimateJSONString(%q) = %d, want %d", raw, got, want)
		}
	}
}
