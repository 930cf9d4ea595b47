package rawjson

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// special8 and escapeOrControl8 may report a word with no special byte
// (that only costs the slow path) but must never miss one.
func TestSpecial8NoFalseNegatives(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	interesting := []byte{0, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5b, 0x5d, 0x7f, 0x80, 0x9f, 0xa0, 0xff}
	var w [8]byte
	for n := 0; n < 200000; n++ {
		want, quote := false, false
		for k := range w {
			if r.IntN(3) == 0 {
				w[k] = interesting[r.IntN(len(interesting))]
			} else {
				w[k] = byte(r.IntN(256))
			}
			want = want || w[k] < 0x20 || w[k] == '\\'
			quote = quote || w[k] == '"'
		}
		if (want || quote) && !special8(binary.LittleEndian.Uint64(w[:])) {
			t.Fatalf("special8 missed a special byte in % x", w)
		}
		if want && escapeOrControl8(binary.LittleEndian.Uint64(w[:])) == 0 {
			t.Fatalf("escapeOrControl8 missed a special byte in % x", w)
		}
	}
}

// scanString agrees with encoding/json on strings whose special byte falls
// at every offset of the eight-byte steps.
func TestScanStringEveryOffset(t *testing.T) {
	for _, special := range []string{`\"`, `\\`, `\u00e9`, `"`, "\x01", "\x1f", `\x`, `\u12`, "é", "\xff"} {
		for pre := 0; pre < 80; pre++ {
			for post := 0; post < 10; post++ {
				doc := `"` + strings.Repeat("a", pre) + special + strings.Repeat("b", post) + `"`
				end, err := scanString([]byte(doc), 0)
				valid := json.Valid([]byte(doc))
				if valid != (err == nil && end == len(doc)) {
					t.Errorf("%q: scanString end %d err %v, json.Valid %v", doc, end, err, valid)
				}
			}
		}
	}
}
