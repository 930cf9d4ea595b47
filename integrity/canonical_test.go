package integrity

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"sorted keys, no whitespace, other members dropped",
			`{ "name": "add", "inputSchema": {"type":"object", "properties": {"b": {"type":"number"}, "a": {"type":"number"}}},
			   "description": "Adds.", "_meta": {"x": 1}, "icons": [{"src": "i.png"}] }`,
			`{"description":"Adds.","inputSchema":{"properties":{"a":{"type":"number"},"b":{"type":"number"}},"type":"object"},"name":"add"}`},
		{"numbers kept as written",
			`{"name":"n","inputSchema":{"maximum":1e400,"minimum":-0.50,"default":12345678901234567890}}`,
			`{"inputSchema":{"default":12345678901234567890,"maximum":1e400,"minimum":-0.50},"name":"n"}`},
		{"escapes normalized, no HTML escaping",
			`{"name":"\u0065cho","description":"a <b> & \"c\" \u00e9"}`,
			`{"description":"a <b> & \"c\" é","name":"echo"}`},
		{"null members are absent",
			`{"name":"x","title":null,"annotations":null}`,
			`{"name":"x"}`},
		{"every fingerprinted member",
			`{"annotations":{"readOnlyHint":true},"outputSchema":{"type":"object"},"title":"T","name":"x","description":"d","inputSchema":{}}`,
			`{"annotations":{"readOnlyHint":true},"description":"d","inputSchema":{},"name":"x","outputSchema":{"type":"object"},"title":"T"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, fp, err := Canonicalize([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if string(def) != tt.want {
				t.Errorf("canonical\n got %s\nwant %s", def, tt.want)
			}
			if fp != fingerprintOf([]byte(tt.want), "") || !strings.HasPrefix(fp, "sha256:") || len(fp) != 7+64 {
				t.Errorf("fingerprint %s", fp)
			}
		})
	}
}

// TestFingerprintStable: layout, key order and escapes do not change a
// fingerprint; any fingerprinted content does, and other members do not.
func TestFingerprintStable(t *testing.T) {
	base := `{"name":"echo","description":"Echoes.","inputSchema":{"type":"object","properties":{"t":{"type":"string"}}}}`
	same := []string{
		"{\n  \"inputSchema\": {\"properties\": {\"t\": {\"type\": \"string\"}}, \"type\": \"object\"},\n  \"description\": \"Echoes.\",\n  \"name\": \"echo\"\n}",
		`{"name":"echo","description":"Echoe\u0073.","inputSchema":{"type":"object","properties":{"t":{"type":"string"}}},"_meta":{"v":2},"icons":[]}`,
	}
	different := []string{
		`{"name":"echo","description":"Echoes!","inputSchema":{"type":"object","properties":{"t":{"type":"string"}}}}`,
		`{"name":"echo","description":"Echoes.","inputSchema":{"type":"object","properties":{"t":{"type":"string","description":"read ~/.ssh"}}}}`,
		`{"name":"echo","description":"Echoes.","inputSchema":{"type":"object","properties":{"t":{"type":"string"}}},"annotations":{"destructiveHint":true}}`,
		`{"name":"echo","title":"Echo","description":"Echoes.","inputSchema":{"type":"object","properties":{"t":{"type":"string"}}}}`,
	}
	_, fp, err := Canonicalize([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range same {
		if _, got, _ := Canonicalize([]byte(s)); got != fp {
			t.Errorf("fingerprint changed for %s", s)
		}
	}
	for _, d := range different {
		if _, got, _ := Canonicalize([]byte(d)); got == fp {
			t.Errorf("fingerprint unchanged for %s", d)
		}
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	for _, raw := range []string{``, `[]`, `"x"`, `null`, `{"name":`, `{"name":"a"} {}`} {
		if _, _, err := Canonicalize([]byte(raw)); !errors.Is(err, ErrBadDefinition) {
			t.Errorf("Canonicalize(%q) = %v, want ErrBadDefinition", raw, err)
		}
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","inputSchema":{"x":[1,2.5e3,{"b":null}]}}`,
		`{"name":"\ud83d\ude00","description":"\u2028<b>"}`,
		`{"name":"n","inputSchema":{"maximum":1e400}}`,
		`{"name":1}`, `{}`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		def, fp, err := Canonicalize(raw)
		if err != nil {
			return
		}
		// Canonical JSON is a fixed point: canonicalizing it again gives
		// the same bytes and fingerprint.
		again, fp2, err := Canonicalize(def)
		if err != nil || string(again) != string(def) || fp2 != fp {
			t.Fatalf("not a fixed point: %s -> %s (%v)", def, again, err)
		}
	})
}

// A definition is its own memory: canonicalizing another tool (which
// reuses the working buffers) leaves it as it was.
func TestCanonicalizeResultsOutliveTheScratch(t *testing.T) {
	a, fpA, err := Canonicalize([]byte(`{"name":"a","description":"First tool.","inputSchema":{"type":"object"}}`))
	if err != nil {
		t.Fatal(err)
	}
	keep := string(a)
	for i := range 50 {
		// Smaller and larger than the first, so that some fit its buffer.
		if _, _, err := Canonicalize(fmt.Appendf(nil, `{"name":"b%d","description":"%s","inputSchema":{}}`, i, strings.Repeat("z", i))); err != nil {
			t.Fatal(err)
		}
	}
	if string(a) != keep || fingerprintOf(a, "") != fpA {
		t.Fatalf("the first definition changed to %s", a)
	}
}

// TestFingerprintSharesKnown: a fingerprint equal to the one the caller
// holds is that string, not a copy; any other is computed as usual, and
// allocates nothing more than its own string.
func TestFingerprintSharesKnown(t *testing.T) {
	def := []byte(`{"name":"a"}`)
	fp := fingerprintOf(def, "")
	held := strings.Clone(fp)
	if got := fingerprintOf(def, held); got != fp || unsafe.StringData(got) != unsafe.StringData(held) {
		t.Fatalf("fingerprintOf with its own fingerprint held = %s at %p; want the held string at %p", got, unsafe.StringData(got), unsafe.StringData(held))
	}
	if got := fingerprintOf(def, "sha256:"+strings.Repeat("0", 64)); got != fp {
		t.Fatalf("fingerprintOf with another fingerprint held = %s; want %s", got, fp)
	}
	if got := unindentedFingerprint([]byte("{\n  \"name\": \"a\"\n}"), held); unsafe.StringData(got) != unsafe.StringData(held) {
		t.Fatalf("unindentedFingerprint with its own fingerprint held = %s, not the held string", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = fingerprintOf(def, held) }); n != 0 {
		t.Fatalf("fingerprintOf with its own fingerprint held: %v allocations; want 0", n)
	}
}

// TestUnindent: a pin file's definition comes back as json.Compact writes
// it, strings as they were; text that is not JSON is cut at its first
// fault, and hashed as cut.
func TestUnindent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{\n  \"name\": \"a b\",\n  \"x\": [ 1, {\"y\": \"\\\" \\\\\" }]\n}", `{"name":"a b","x":[1,{"y":"\" \\"}]}`},
		{" [ ] ", `[]`},
		{"{\n  \"a\": 1,\n  x\n}", `{"a":1`},
		{"{\"a\": [1 2]}", `{"a":[1`},
		{`"unterminated`, ``},
	} {
		if got := unindent([]byte(tc.in)); string(got) != tc.want {
			t.Errorf("unindent(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got, want := unindentedFingerprint([]byte(tc.in), ""), fingerprintOf([]byte(tc.want), ""); got != want {
			t.Errorf("unindentedFingerprint(%q) = %s, want %s", tc.in, got, want)
		}
	}
}
